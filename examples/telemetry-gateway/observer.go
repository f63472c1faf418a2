package main

import (
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/middleware/otelsourceip"
	"go.opentelemetry.io/otel/metric"
)

// observer returns the middleware Observer that records clientip's
// resolutions, masquerade detections, PROXY refusals and policy denials as
// metrics (sourceip_resolutions_total, …) on mp.
func observer(mp metric.MeterProvider) (middleware.Observer, error) {
	return otelsourceip.New(otelsourceip.WithMeterProvider(mp))
}

package main

import (
	"github.com/sourceip/sourceip/middleware"
	"go.opentelemetry.io/otel/metric"
)

// observer returns the middleware Observer that records clientip's
// resolutions and refusals as metrics.
func observer(mp metric.MeterProvider) (middleware.Observer, error) {
	return nil, nil
}

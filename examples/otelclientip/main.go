// Command otelclientip shows otelhttp's client.address pitfall and its fix.
// otelhttp sets client.address on its server span to the leftmost
// X-Forwarded-For entry, which any client can write. Mounting sourceip's
// resolve middleware inside otelhttp's handler, with otelsourceip as its
// Observer, replaces it with the resolved client (the last value set for a
// key wins), or with an empty value when resolution fails or lands on a
// masquerading node, and adds the chain's other layers and sourceip's
// counters.
//
//	go run ./otelclientip
//
// runs both handlers on one forged request and prints what each span says.
// It needs no network.
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/middleware/otelsourceip"
)

// newHandler wraps app in otelhttp alone.
func newPlainHandler(app http.Handler, tp trace.TracerProvider) http.Handler {
	return otelhttp.NewHandler(app, "server",
		otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
}

// newHandler wraps app in the resolve middleware, observed by inst, inside
// otelhttp's handler, so the middleware annotates otelhttp's server span.
func newHandler(app http.Handler, trust clientip.Trust, inst *otelsourceip.Instrumentation, tp trace.TracerProvider) (http.Handler, error) {
	resolve, err := middleware.New(middleware.Config{Trust: trust, Observer: inst})
	if err != nil {
		return nil, err
	}
	return newPlainHandler(resolve(app), tp), nil
}

func main() {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	inst, err := otelsourceip.New(otelsourceip.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), // the reverse proxies
		Header:         "X-Forwarded-For",
	})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	fixed, err := newHandler(app, r, inst, tp)
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"otelhttp alone", newPlainHandler(app, tp)}, {"otelhttp + sourceip", fixed}} {
		// A client writes 6.6.6.6; the proxy 10.0.0.2 appends the client's
		// real address.
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "10.0.0.2:40000"
		req.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7")
		h.h.ServeHTTP(httptest.NewRecorder(), req)
		spans := sr.Ended()
		fmt.Fprintf(os.Stdout, "%-20s client.address=%s\n", h.name, attr(spans[len(spans)-1].Attributes(), semconv.ClientAddressKey))
	}
}

func attr(kvs []attribute.KeyValue, k attribute.Key) string {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

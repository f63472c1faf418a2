package otelsourceip_test

import (
	"log"
	"net"
	"net/http"

	"go.opentelemetry.io/otel"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/middleware/otelsourceip"
	"github.com/sourceip/sourceip/proxyproto"
)

// The whole wiring: PROXY refusals, resolutions and denials reach the
// providers the application registered (here the globals).
func ExampleNew() {
	inst, err := otelsourceip.New(
		otelsourceip.WithMeterProvider(otel.GetMeterProvider()),
		otelsourceip.WithTracerProvider(otel.GetTracerProvider()),
	)
	if err != nil {
		log.Fatal(err)
	}
	// The chain's one trust source: the load balancers.
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24")})

	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust:    trust,
		OnReject: inst.ObserveProxyRejection,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	reg, err := inst.ObserveListener("mqtt", ln) // shed connections, accept errors, pending
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()

	resolve, err := middleware.New(middleware.Config{
		Trust:    trust,
		Observer: inst,
	})
	if err != nil {
		log.Fatal(err)
	}
	policy, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{
		Allow:    clientip.MustParsePrefixSet("198.51.100.0/24"),
		Observer: inst,
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler:     resolve(policy.Handler(http.NotFoundHandler())),
		ConnContext: proxyproto.ConnContext,
	}
	_ = srv // srv.Serve(ln)
}

// Correcting the client.address that otelhttp took from the leftmost
// X-Forwarded-For entry, in a handler behind the resolve middleware, without
// an Instrumentation: the last value set wins. A masqueraded result names no
// client, so the attribute is cleared (set empty) rather than left with the
// client-written value.
func Example_correctClientAddress() {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := ""
		if res, ok := clientip.FromContext(r.Context()); ok && !res.Masqueraded {
			addr = res.Client.String()
		}
		trace.SpanFromContext(r.Context()).SetAttributes(semconv.ClientAddress(addr))
	})
	_ = handler // mux.Handle("/", handler); otelhttp.NewHandler(resolve(mux), "server")
}

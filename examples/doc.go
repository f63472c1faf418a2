// Package examples holds sourceip's runnable examples. It is its own module,
// with a replace directive pointing at the library, so that the MQTT broker,
// web frameworks, exporters and other heavy dependencies the examples use never
// enter the library's dependency graph.
//
//   - telemetry-gateway: the reference IoT ingest gateway (MQTT over TLS behind
//     a PROXY-protocol load balancer, plus HTTP ingest), logging the source
//     address it observes at every layer.
//   - chiclientip: the resolve middleware on a chi router, with a
//     source-range policy on a route group.
//   - ginclientip: for gin (and other frameworks with their own handler types):
//     a gin middleware that calls the resolver on the request.
//   - otelclientip: otelhttp's spoofable client.address and its correction
//     with middleware/otelsourceip; its test checks every span attribute and
//     metric point against the OpenTelemetry SDK's in-memory recorder and
//     reader.
//   - policylab: builds a small cluster in Linux network namespaces and proves
//     what a backend observes under each Kubernetes traffic policy.
package examples

// Package natsserver pins the NATS server that the telemetry gateway's tests
// run: go build github.com/nats-io/nats-server/v2 in this directory builds
// the real nats-server at the version in go.mod (its tool directive), and
// the tests start three of them as a JetStream cluster.
//
// It is a module of its own so that the server and its dependencies stay out
// of the examples module: building the gateway, or running its demo, never
// downloads or compiles them; only the tests that need a NATS server do, once.
package natsserver

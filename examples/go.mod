module github.com/sourceip/sourceip/examples

go 1.26.0

replace github.com/sourceip/sourceip => ../

require (
	github.com/eclipse/paho.golang v0.23.0
	github.com/eclipse/paho.mqtt.golang v1.5.1
	github.com/go-chi/chi/v5 v5.5.0
	github.com/mochi-mqtt/server/v2 v2.7.9
	github.com/sourceip/sourceip v0.0.0-00010101000000-000000000000
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/metric v1.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/pires/go-proxyproto v0.15.0 // indirect
	github.com/rs/xid v1.4.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

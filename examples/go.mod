module github.com/sourceip/sourceip/examples

go 1.26.0

replace github.com/sourceip/sourceip => ../

require (
	github.com/mochi-mqtt/server/v2 v2.7.9
	github.com/sourceip/sourceip v0.0.0-00010101000000-000000000000
)

require (
	github.com/gorilla/websocket v1.5.0 // indirect
	github.com/pires/go-proxyproto v0.15.0 // indirect
	github.com/rs/xid v1.4.0 // indirect
)

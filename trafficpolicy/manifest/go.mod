module github.com/sourceip/sourceip/trafficpolicy/manifest

go 1.26.0

replace github.com/sourceip/sourceip => ../..

require (
	github.com/sourceip/sourceip v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v2 v2.4.2
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/pires/go-proxyproto v0.15.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

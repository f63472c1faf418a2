module github.com/sourceip/sourceip

go 1.26

require (
	github.com/pires/go-proxyproto v0.15.0
	sigs.k8s.io/yaml v1.6.0
)

require go.yaml.in/yaml/v2 v2.4.2 // indirect

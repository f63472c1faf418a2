module github.com/sourceip/sourceip

go 1.26

require github.com/pires/go-proxyproto v0.15.0

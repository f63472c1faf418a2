package trafficpolicy

import (
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// HealthConfig configures a [HealthServer].
type HealthConfig struct {
	// Namespace and Name identify the Service in the answer's body. Both are
	// required, in printable UTF-8 (the body quotes them as JSON strings).
	Namespace, Name string

	// Endpoints is the registry whose ready endpoints are counted. Required.
	Endpoints *Registry

	// ProxyHealthy reports whether the proxy on this node (kube-proxy's own
	// health, or your gateway's) is healthy; it is called once per request
	// and must be safe for concurrent use. Nil means always healthy: the
	// answer then depends on the endpoints alone.
	ProxyHealthy func() bool
}

// HealthServer answers load-balancer health checks exactly as kube-proxy
// answers them on a Service's healthCheckNodePort
// (pkg/proxy/healthcheck/service_health.go): every path and method get the
// same answer, 200 when the node has at least one ready local endpoint and
// the proxy is healthy and 503 otherwise, with the headers
//
//	Content-Type: application/json
//	X-Content-Type-Options: nosniff
//	X-Load-Balancing-Endpoint-Weight: <localEndpoints>
//
// and the tab-indented body, without a final newline,
//
//	{
//		"service": {
//			"namespace": "iot",
//			"name": "mqtt-gw"
//		},
//		"localEndpoints": 1,
//		"serviceProxyHealthy": true
//	}
//
// so that any load balancer configured for kube-proxy (cloud controllers
// probe GET /healthz on the port) can probe it instead: on node-local
// gateways, behind bare-metal load balancers, in labs. Serve it on a
// listener from [OptionalProxyHeader] when the load balancer puts a PROXY
// header in front of its health checks.
//
// A HealthServer is safe for concurrent use. The zero HealthServer has no
// endpoints, so it answers 503; create one with [NewHealthServer].
type HealthServer struct {
	namespace, name string
	eps             *Registry
	healthy         func() bool
}

// NewHealthServer returns a HealthServer for cfg, or an error wrapping
// [ErrInvalidConfig] when a required field is missing.
func NewHealthServer(cfg HealthConfig) (*HealthServer, error) {
	switch {
	case cfg.Name == "" || cfg.Namespace == "":
		return nil, fmt.Errorf("%w: HealthConfig needs the Service's Namespace and Name", ErrInvalidConfig)
	case !jsonQuotable(cfg.Namespace) || !jsonQuotable(cfg.Name):
		return nil, fmt.Errorf("%w: HealthConfig Namespace %q and Name %q must be printable UTF-8", ErrInvalidConfig, cfg.Namespace, cfg.Name)
	case cfg.Endpoints == nil:
		return nil, fmt.Errorf("%w: HealthConfig.Endpoints is nil", ErrInvalidConfig)
	}
	return &HealthServer{namespace: cfg.Namespace, name: cfg.Name, eps: cfg.Endpoints, healthy: cfg.ProxyHealthy}, nil
}

// HealthStatus is one health answer's facts.
type HealthStatus struct {
	LocalEndpoints int  // distinct addresses with a ready local endpoint
	ProxyHealthy   bool // the proxy's own health
}

// Healthy reports whether the answer is 200: at least one ready local
// endpoint and a healthy proxy.
func (h HealthStatus) Healthy() bool { return h.LocalEndpoints != 0 && h.ProxyHealthy }

// Code returns the HTTP status of the answer: 200 or 503.
func (h HealthStatus) Code() int {
	if h.Healthy() {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}

// AppendJSON appends kube-proxy's body for h and the named Service to b.
// Strings are quoted as kube-proxy's %q quotes them, which is JSON for
// printable UTF-8 (and so for the DNS labels Kubernetes allows as names),
// the names [NewHealthServer] accepts.
func (h HealthStatus) AppendJSON(b []byte, namespace, name string) []byte {
	b = append(b, "{\n\t\"service\": {\n\t\t\"namespace\": "...)
	b = strconv.AppendQuote(b, namespace)
	b = append(b, ",\n\t\t\"name\": "...)
	b = strconv.AppendQuote(b, name)
	b = append(b, "\n\t},\n\t\"localEndpoints\": "...)
	b = strconv.AppendInt(b, int64(h.LocalEndpoints), 10)
	b = append(b, ",\n\t\"serviceProxyHealthy\": "...)
	b = strconv.AppendBool(b, h.ProxyHealthy)
	return append(b, "\n}"...)
}

// jsonQuotable reports whether strconv.Quote(s) is a JSON string: s is valid
// UTF-8 of printable runes, so that the only escapes are \" and \\ (Quote
// writes others, such as \x01 or \a, that JSON does not have).
func jsonQuotable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// Status returns the current answer's facts.
func (s *HealthServer) Status() HealthStatus {
	st := HealthStatus{ProxyHealthy: s.healthy == nil || s.healthy()}
	if s.eps != nil {
		st.LocalEndpoints = s.eps.LocalReady()
	}
	return st
}

// ServeHTTP answers any request, whatever its path and method, with the
// current status.
func (s *HealthServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	st := s.Status()
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h["X-Load-Balancing-Endpoint-Weight"] = []string{strconv.Itoa(st.LocalEndpoints)}
	w.WriteHeader(st.Code())
	var buf [256]byte
	w.Write(st.AppendJSON(buf[:0], s.namespace, s.name))
}

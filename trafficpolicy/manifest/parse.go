package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/sourceip/sourceip/trafficpolicy"
	"sigs.k8s.io/yaml"
)

// Parse reads a Service from a YAML or JSON manifest: a single
// document, a multi-document YAML stream ("---" separated) or a List (Lists
// nested at most 8 deep), of which exactly one item must be a Service (others, such as the Deployment
// next to it, are skipped). YAML is converted to JSON by sigs.k8s.io/yaml
// and decoded with encoding/json, as the API server does, so YAML's type
// rules are JSON's (a quoted "80" is not a port) and duplicate keys are an
// error. Unlike the API server, field names match case-insensitively.
//
// Defaults follow the API server: type ClusterIP, externalTrafficPolicy
// Cluster (for types that take one), internalTrafficPolicy Cluster, ipMode
// VIP. The manifest is validated against the Service rules that concern
// traffic policy — value spellings, externalTrafficPolicy only on
// externally-accessible Services, healthCheckNodePort only with type
// LoadBalancer and externalTrafficPolicy Local, nodePort not on ClusterIP
// Services, loadBalancerSourceRanges only on LoadBalancer Services, port
// ranges, addresses — and a violation is an error wrapping
// [ErrInvalidService] that names the field.
//
// The load balancer's kind is inferred from these annotations:
//
//	service.beta.kubernetes.io/aws-load-balancer-proxy-protocol: "*"           ProxyProtocol
//	  with service.beta.kubernetes.io/aws-load-balancer-type: nlb             PassthroughProxyProtocol
//	service.beta.kubernetes.io/do-loadbalancer-enable-proxy-protocol: "true"   ProxyProtocol
//	load-balancer.hetzner.cloud/uses-proxyprotocol: "true"                    ProxyProtocol
//	service.beta.kubernetes.io/linode-loadbalancer-default-proxy-protocol,
//	service.beta.kubernetes.io/linode-loadbalancer-proxy-protocol: v1|v2      ProxyProtocol
//	loadbalancer.openstack.org/proxy-protocol: true|v1|v2                     ProxyProtocol
//	service.beta.kubernetes.io/ovh-loadbalancer-proxy-protocol: v1|v2|…       ProxyProtocol
//	service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v1|-v2         ProxyProtocol
//	service.beta.kubernetes.io/aws-load-balancer-type: nlb                    Passthrough
//	metallb.universe.tf/… or metallb.io/…                                     Passthrough
//
// A PROXY-protocol annotation wins over the others. cloud-provider-aws's NLB
// registers instance targets, whose client IP preservation is on by default,
// so with proxy protocol it is [trafficpolicy.LBPassthroughProxyProtocol].
// The AWS Load Balancer Controller's NLB (type "external", or the older
// "nlb-ip") keeps the client's address when its target group preserves
// client IPs: by default for instance targets (the controller's default
// target type) and not for IP targets, unless
// service.beta.kubernetes.io/aws-load-balancer-target-group-attributes sets
// preserve_client_ip.enabled. Preserving, it is Passthrough, or
// PassthroughProxyProtocol with proxy protocol; not preserving, it connects
// from its own address: ProxyProtocol with proxy protocol, FullProxy
// without. Anything else leaves [trafficpolicy.LBUnknown]; set Service.LB
// yourself.
func Parse(data []byte) (trafficpolicy.Service, error) {
	var found []json.RawMessage
	for i, doc := range splitDocuments(data) {
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return trafficpolicy.Service{}, fmt.Errorf("%w: document %d: %v", ErrMalformedManifest, i+1, err)
		}
		svcs, err := servicesIn(j, 0)
		if err != nil {
			return trafficpolicy.Service{}, fmt.Errorf("%w: document %d: %v", ErrMalformedManifest, i+1, err)
		}
		found = append(found, svcs...)
	}
	switch len(found) {
	case 0:
		return trafficpolicy.Service{}, ErrNoService
	case 1:
	default:
		return trafficpolicy.Service{}, fmt.Errorf("%w: found %d", ErrManyServices, len(found))
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(found[0]))
	if err := dec.Decode(&m); err != nil {
		return trafficpolicy.Service{}, fmt.Errorf("%w: %v", ErrMalformedManifest, err)
	}
	return m.service()
}

// splitDocuments splits a YAML stream into its documents at every line that
// starts with a document marker, "---" or "...", followed by a blank or the
// line's end (YAML 1.2, section 9.1.2: a marker at the start of a line always
// ends the document before it). What follows the marker on its line begins
// the next document: "--- # comment", but also "--- !!map",
// "--- {kind: Service}" or "--- |". Documents that hold only blanks and
// comments are dropped; directives stay with the document after them. Every
// piece holds one document, which matters because
// YAMLToJSONStrict reads the first document of its input and silently drops
// the rest.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	start := 0
	keep := func(end int) {
		if doc := data[start:end]; hasContent(doc) {
			docs = append(docs, doc)
		}
	}
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data)
		if end >= 0 {
			next = i + end + 1
		}
		line := bytes.TrimRight(data[i:next], "\r\n")
		// Directives ("%YAML 1.1") belong to the document whose "---"
		// follows them, so a piece of directives is not cut off.
		if isDocumentMarker(line) && !(line[0] == '-' && isPrologue(data[start:i])) {
			keep(i)
			start = i + 3
		}
		i = next
	}
	keep(len(data))
	return docs
}

// isDocumentMarker reports whether line starts with a document marker.
func isDocumentMarker(line []byte) bool {
	if len(line) < 3 || (!bytes.HasPrefix(line, []byte("---")) && !bytes.HasPrefix(line, []byte("..."))) {
		return false
	}
	return len(line) == 3 || line[3] == ' ' || line[3] == '\t'
}

// isPrologue reports whether doc holds only directives, comments and blank
// lines.
func isPrologue(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' && l[0] != '%' {
			return false
		}
	}
	return true
}

func hasContent(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return true
		}
	}
	return false
}

// maxListDepth bounds how deep Lists may nest. Every level decodes its
// items anew, so the work and memory grow with the depth times the size:
// 5000 nested Lists in 127 KB took 2 s and 1 GB. kubectl writes flat Lists.
const maxListDepth = 8

// servicesIn returns the Service objects in one JSON document: the document
// itself, or the items of a List (nested at most maxListDepth deep; depth is
// the document's).
func servicesIn(j []byte, depth int) ([]json.RawMessage, error) {
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
		return nil, nil // a scalar or sequence document holds no object
	}
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(j, &head); err != nil {
		return nil, err
	}
	switch {
	case head.Kind == "Service":
		if head.APIVersion != "v1" {
			return nil, fmt.Errorf("Service with apiVersion %q, want \"v1\"", head.APIVersion)
		}
		return []json.RawMessage{j}, nil
	case strings.HasSuffix(head.Kind, "List"):
		if depth == maxListDepth {
			return nil, fmt.Errorf("Lists nested more than %d deep", maxListDepth)
		}
		var out []json.RawMessage
		for _, it := range head.Items {
			s, err := servicesIn(it, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	}
	return nil, nil
}

// manifest is the part of a v1 Service this package reads.
type manifest struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Type                     string   `json:"type"`
		ClusterIP                string   `json:"clusterIP"`
		ExternalIPs              []string `json:"externalIPs"`
		ExternalTrafficPolicy    string   `json:"externalTrafficPolicy"`
		InternalTrafficPolicy    string   `json:"internalTrafficPolicy"`
		TrafficDistribution      *string  `json:"trafficDistribution"`
		HealthCheckNodePort      int64    `json:"healthCheckNodePort"`
		LoadBalancerSourceRanges []string `json:"loadBalancerSourceRanges"`
		Ports                    []struct {
			Name     string `json:"name"`
			Protocol string `json:"protocol"`
			Port     int64  `json:"port"`
			NodePort int64  `json:"nodePort"`
		} `json:"ports"`
	} `json:"spec"`
	Status struct {
		LoadBalancer struct {
			Ingress []struct {
				IP       string  `json:"ip"`
				Hostname string  `json:"hostname"`
				IPMode   *string `json:"ipMode"`
			} `json:"ingress"`
		} `json:"loadBalancer"`
	} `json:"status"`
}

func invalid(field string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidService, field, fmt.Sprintf(format, args...))
}

func (m *manifest) service() (trafficpolicy.Service, error) {
	s := trafficpolicy.Service{Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}
	sp := &m.Spec
	if err := s.Type.UnmarshalText([]byte(sp.Type)); err != nil {
		return trafficpolicy.Service{}, invalid("spec.type", "unsupported value %q", sp.Type)
	}
	s.Headless = sp.ClusterIP == "None"
	for i, a := range sp.ExternalIPs {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" {
			return trafficpolicy.Service{}, invalid(fmt.Sprintf("spec.externalIPs[%d]", i), "%q is not an IP address", a)
		}
		s.ExternalIPs = append(s.ExternalIPs, ip)
	}

	externallyAccessible := exposesNodePorts(s.Type) || len(s.ExternalIPs) > 0
	if sp.ExternalTrafficPolicy != "" && !externallyAccessible {
		return trafficpolicy.Service{}, invalid("spec.externalTrafficPolicy", "may only be set for externally-accessible services")
	}
	if err := s.ExternalTrafficPolicy.UnmarshalText([]byte(sp.ExternalTrafficPolicy)); err != nil {
		return trafficpolicy.Service{}, invalid("spec.externalTrafficPolicy", "unsupported value %q: want \"Cluster\" or \"Local\"", sp.ExternalTrafficPolicy)
	}
	if err := s.InternalTrafficPolicy.UnmarshalText([]byte(sp.InternalTrafficPolicy)); err != nil {
		return trafficpolicy.Service{}, invalid("spec.internalTrafficPolicy", "unsupported value %q: want \"Cluster\" or \"Local\"", sp.InternalTrafficPolicy)
	}
	if sp.TrafficDistribution != nil {
		if err := s.TrafficDistribution.UnmarshalText([]byte(*sp.TrafficDistribution)); err != nil || s.TrafficDistribution == trafficpolicy.DistributionDefault {
			return trafficpolicy.Service{}, invalid("spec.trafficDistribution", "unsupported value %q: want \"PreferClose\", \"PreferSameZone\" or \"PreferSameNode\"", *sp.TrafficDistribution)
		}
	}

	switch hc := sp.HealthCheckNodePort; {
	case hc == 0:
	case !s.NeedsHealthCheck():
		return trafficpolicy.Service{}, invalid("spec.healthCheckNodePort", "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'")
	case hc < 1 || hc > 65535:
		return trafficpolicy.Service{}, invalid("spec.healthCheckNodePort", "%d must be between 1 and 65535, inclusive", hc)
	default:
		s.HealthCheckNodePort = uint16(hc)
	}

	for i, p := range sp.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		if proto != "TCP" && proto != "UDP" && proto != "SCTP" {
			return trafficpolicy.Service{}, invalid(field+".protocol", "unsupported value %q", p.Protocol)
		}
		if p.Port < 1 || p.Port > 65535 {
			return trafficpolicy.Service{}, invalid(field+".port", "%d must be between 1 and 65535, inclusive", p.Port)
		}
		if p.NodePort != 0 {
			if !exposesNodePorts(s.Type) {
				return trafficpolicy.Service{}, invalid(field+".nodePort", "may not be used when `type` is '%s'", s.Type)
			}
			if p.NodePort < 1 || p.NodePort > 65535 {
				return trafficpolicy.Service{}, invalid(field+".nodePort", "%d must be between 1 and 65535, inclusive", p.NodePort)
			}
		}
		s.Ports = append(s.Ports, trafficpolicy.Port{Name: p.Name, Protocol: proto, Port: uint16(p.Port), NodePort: uint16(p.NodePort)})
	}

	ranges, field := sp.LoadBalancerSourceRanges, "spec.loadBalancerSourceRanges"
	if len(ranges) == 0 {
		if a := m.Metadata.Annotations[annSourceRanges]; a != "" {
			ranges, field = strings.Split(a, ","), "metadata.annotations["+annSourceRanges+"]"
		}
	}
	if len(ranges) > 0 && s.Type != trafficpolicy.TypeLoadBalancer {
		return trafficpolicy.Service{}, invalid(field, "may only be used when `type` is 'LoadBalancer'")
	}
	for i, r := range ranges {
		p, err := netip.ParsePrefix(strings.TrimSpace(r))
		if err != nil || p.Addr().Zone() != "" {
			return trafficpolicy.Service{}, invalid(fmt.Sprintf("%s[%d]", field, i), "%q is not a CIDR such as 10.0.0.0/8", r)
		}
		s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, p.Masked())
	}

	for i, in := range m.Status.LoadBalancer.Ingress {
		field := fmt.Sprintf("status.loadBalancer.ingress[%d]", i)
		e := trafficpolicy.Ingress{Hostname: in.Hostname}
		if in.IP != "" {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil || ip.Zone() != "" {
				return trafficpolicy.Service{}, invalid(field+".ip", "%q is not an IP address", in.IP)
			}
			e.IP = ip
		}
		if in.IPMode != nil {
			if in.IP == "" {
				return trafficpolicy.Service{}, invalid(field+".ipMode", "may only be set when `ip` is set")
			}
			if err := e.IPMode.UnmarshalText([]byte(*in.IPMode)); err != nil || *in.IPMode == "" {
				return trafficpolicy.Service{}, invalid(field+".ipMode", "unsupported value %q: want \"VIP\" or \"Proxy\"", *in.IPMode)
			}
		}
		s.Ingress = append(s.Ingress, e)
	}

	s.LB, s.LBHint = inferLB(m.Metadata.Annotations)
	return s, nil
}

const (
	annSourceRanges     = "service.beta.kubernetes.io/load-balancer-source-ranges"
	annAWSProxyProtocol = "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol"
	annAWSType          = "service.beta.kubernetes.io/aws-load-balancer-type"
)

// proxyProtocolAnnotations maps a cloud's PROXY-protocol annotation to a
// check of its value.
var proxyProtocolAnnotations = []struct {
	key string
	on  func(string) bool
}{
	{annAWSProxyProtocol, func(v string) bool { return v == "*" }},
	{"service.beta.kubernetes.io/do-loadbalancer-enable-proxy-protocol", isTrue},
	{"load-balancer.hetzner.cloud/uses-proxyprotocol", isTrue},
	{"service.beta.kubernetes.io/linode-loadbalancer-default-proxy-protocol", isVersion},
	{"service.beta.kubernetes.io/linode-loadbalancer-proxy-protocol", isVersion},
	{"loadbalancer.openstack.org/proxy-protocol", func(v string) bool { return isTrue(v) || isVersion(v) }},
	{"service.beta.kubernetes.io/ovh-loadbalancer-proxy-protocol", func(v string) bool { return strings.HasPrefix(strings.ToLower(v), "v") }},
	{"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v1", isSet},
	{"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2", isSet},
}

func isTrue(v string) bool    { return strings.EqualFold(v, "true") }
func isVersion(v string) bool { return v == "v1" || v == "v2" }
func isSet(v string) bool     { return v != "" && !strings.EqualFold(v, "false") }

func inferLB(ann map[string]string) (trafficpolicy.LBKind, string) {
	preserves, controller, why := awsControllerPreserves(ann)
	for _, a := range proxyProtocolAnnotations {
		if v, ok := ann[a.key]; ok && a.on(v) {
			if a.key == annAWSProxyProtocol && (strings.EqualFold(ann[annAWSType], "nlb") || controller && preserves) {
				return trafficpolicy.LBPassthroughProxyProtocol, a.key
			}
			return trafficpolicy.LBProxyProtocol, a.key
		}
	}
	if strings.EqualFold(ann[annAWSType], "nlb") {
		return trafficpolicy.LBPassthrough, annAWSType
	}
	if controller {
		if preserves {
			return trafficpolicy.LBPassthrough, why
		}
		return trafficpolicy.LBFullProxy, why
	}
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, "metallb.universe.tf/") || strings.HasPrefix(k, "metallb.io/") {
			return trafficpolicy.LBPassthrough, k
		}
	}
	return trafficpolicy.LBUnknown, ""
}

// awsControllerPreserves reports whether ann is an AWS Load Balancer
// Controller NLB (controller) and whether its target group keeps the
// client's address (preserves), with the annotation that decided it: the
// target group attributes' preserve_client_ip.enabled when set, else the
// target type's default (AWS: on for instance targets, off for IP targets
// over TCP and TLS).
func awsControllerPreserves(ann map[string]string) (preserves, controller bool, why string) {
	const (
		targetType = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
		attributes = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
	)
	kind := strings.ToLower(ann[annAWSType])
	if kind != "external" && kind != "nlb-ip" {
		return false, false, ""
	}
	target := strings.ToLower(ann[targetType])
	if kind == "nlb-ip" {
		target = "ip"
	}
	preserves, why = target != "ip", annAWSType
	if _, ok := ann[targetType]; ok && kind == "external" {
		why = targetType
	}
	for attr := range strings.SplitSeq(ann[attributes], ",") {
		k, v, _ := strings.Cut(attr, "=")
		if strings.TrimSpace(k) == "preserve_client_ip.enabled" {
			preserves, why = strings.EqualFold(strings.TrimSpace(v), "true"), attributes
		}
	}
	return preserves, true, why
}

// exposesNodePorts reports whether the type opens node ports (and maybe a
// load balancer), which is when externalTrafficPolicy applies.
func exposesNodePorts(t trafficpolicy.ServiceType) bool {
	return t == trafficpolicy.TypeNodePort || t == trafficpolicy.TypeLoadBalancer
}

package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
)

// compare asks kube-proxy's health servers on node n and the project's the
// same requests from the load balancer's namespace, as a load balancer
// would, and records whether the answers are the same byte for byte:
// the Service's health check node port (while the Service has one) and
// :10256's /healthz and /livez.
func (l *Lab) compare(ctx context.Context, n *node, moment string) {
	if l.res == nil {
		return
	}
	type pair struct {
		what      string
		kube, own string
		times     bool
	}
	var pairs []pair
	if l.model.NeedsHealthCheck() {
		pairs = append(pairs, pair{"service health check", fmt.Sprintf(":%d/healthz", topo.HealthCheckNodePort), fmt.Sprintf(":%d/healthz", topo.OwnHealthPort), false})
	}
	pairs = append(pairs,
		pair{"node /healthz", fmt.Sprintf(":%d/healthz", topo.ProxyHealthzPort), fmt.Sprintf(":%d/healthz", topo.OwnNodeHealthPort), true},
		pair{"node /livez", fmt.Sprintf(":%d/livez", topo.ProxyHealthzPort), fmt.Sprintf(":%d/livez", topo.OwnNodeHealthPort), true})
	client := &http.Client{Transport: &http.Transport{DialContext: l.lb.ns.Dialer(), DisableKeepAlives: true}, Timeout: 2 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	host := n.addr.V4.String()
	for _, p := range pairs {
		c := report.Comparison{Node: n.name, Moment: moment, What: p.what}
		c.KubeProxy = fetch(ctx, client, "http://"+host+p.kube)
		c.Own = fetch(ctx, client, "http://"+host+p.own)
		c.Equal, c.Diff = sameAnswer(c.KubeProxy, c.Own, p.times)
		l.resMu.Lock()
		l.res.Compare = append(l.res.Compare, c)
		l.resMu.Unlock()
	}
}

func fetch(ctx context.Context, client *http.Client, url string) report.Answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return report.Answer{Err: err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		return report.Answer{Err: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	a := report.Answer{Code: resp.StatusCode, Body: string(body)}
	if err != nil {
		a.Err = err.Error()
	}
	var hdr []string
	for k, vs := range resp.Header {
		if k == "Date" {
			continue
		}
		for _, v := range vs {
			hdr = append(hdr, k+": "+v)
		}
	}
	if resp.ContentLength >= 0 {
		hdr = append(hdr, fmt.Sprintf("Content-Length: %d", resp.ContentLength))
	}
	slices.Sort(hdr)
	a.Headers = strings.Join(slices.Compact(hdr), "\n")
	return a
}

// rfc3339 matches the times encoding/json writes for a time.Time.
var rfc3339 = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)

// sameAnswer compares two answers byte for byte; with times, the RFC 3339
// times in the bodies must parse and are compared as <time>.
func sameAnswer(kube, own report.Answer, times bool) (bool, string) {
	if kube.Err != "" || own.Err != "" {
		return false, fmt.Sprintf("kube-proxy: %q, trafficpolicy: %q", kube.Err, own.Err)
	}
	if kube.Code != own.Code {
		return false, fmt.Sprintf("status %d vs %d", kube.Code, own.Code)
	}
	kh, oh := kube.Headers, own.Headers
	if times {
		// The times' digits (RFC 3339 drops trailing zeros of the
		// nanoseconds) change the length: each Content-Length must be its
		// body's, and the rest of the headers must match.
		var err error
		if kh, err = dropLength(kube); err != nil {
			return false, "kube-proxy: " + err.Error()
		}
		if oh, err = dropLength(own); err != nil {
			return false, "trafficpolicy: " + err.Error()
		}
	}
	if kh != oh {
		return false, fmt.Sprintf("headers %q vs %q", kube.Headers, own.Headers)
	}
	kb, ob := kube.Body, own.Body
	if times {
		var err error
		if kb, err = maskTimes(kb); err != nil {
			return false, "kube-proxy's body: " + err.Error()
		}
		if ob, err = maskTimes(ob); err != nil {
			return false, "trafficpolicy's body: " + err.Error()
		}
	}
	if kb != ob {
		return false, fmt.Sprintf("body %q vs %q", kb, ob)
	}
	return true, ""
}

// dropLength returns a's headers without Content-Length, after checking
// that it gives the body's length.
func dropLength(a report.Answer) (string, error) {
	var keep []string
	for _, h := range strings.Split(a.Headers, "\n") {
		if n, ok := strings.CutPrefix(h, "Content-Length: "); ok {
			if n != strconv.Itoa(len(a.Body)) {
				return "", fmt.Errorf("Content-Length %s for a body of %d bytes", n, len(a.Body))
			}
			continue
		}
		keep = append(keep, h)
	}
	return strings.Join(keep, "\n"), nil
}

func maskTimes(body string) (string, error) {
	var bad error
	out := rfc3339.ReplaceAllStringFunc(body, func(m string) string {
		if _, err := time.Parse(time.RFC3339Nano, strings.Trim(m, `"`)); err != nil && bad == nil {
			bad = err
		}
		return `"<time>"`
	})
	return out, bad
}

// healthOf asks every node's health check node port from the load
// balancer's namespace: kube-proxy's answer, which the load balancers see.
func (l *Lab) healthOf(ctx context.Context) []report.HealthSnap {
	client := &http.Client{Transport: &http.Transport{DialContext: l.lb.ns.Dialer(), DisableKeepAlives: true}, Timeout: time.Second}
	var out []report.HealthSnap
	for _, n := range l.nodes {
		h := report.HealthSnap{Node: n.name}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(n.addr.V4, topo.HealthCheckNodePort)), nil)
		resp, err := client.Do(req)
		if err != nil {
			h.Err = err
		} else {
			resp.Body.Close()
			h.Code, h.Weight = resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight")
		}
		out = append(out, h)
	}
	return out
}

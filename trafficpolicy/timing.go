package trafficpolicy

import (
	"fmt"
	"time"
)

// Timing is how a load balancer health-checks a node: a probe every
// Interval, each given Timeout to answer; Rise consecutive successes make a
// node a member (it gets new connections), Fall consecutive failures take it
// out. The zero Timing is invalid.
type Timing struct {
	Interval time.Duration
	Timeout  time.Duration // zero means Interval
	Rise     int
	Fall     int
}

// The presets below are the load balancers' defaults for a Service with
// externalTrafficPolicy Local (reference Part B.5, from the cloud providers'
// sources).

// HAProxyTiming returns HAProxy's defaults: inter 2s (also the check
// timeout when "timeout check" is unset), rise 2, fall 3.
func HAProxyTiming() Timing {
	return Timing{Interval: 2 * time.Second, Timeout: 2 * time.Second, Rise: 2, Fall: 3}
}

// AWSNLBTiming returns the health check cloud-provider-aws gives an NLB for
// a Local Service: HTTP /healthz on the healthCheckNodePort every 10s,
// timeout 10s, healthy and unhealthy thresholds 2.
func AWSNLBTiming() Timing {
	return Timing{Interval: 10 * time.Second, Timeout: 10 * time.Second, Rise: 2, Fall: 2}
}

// AWSLBCTiming returns the AWS Load Balancer Controller's defaults for
// instance targets of a Local Service: every 10s, timeout 6s, thresholds 2.
func AWSLBCTiming() Timing {
	return Timing{Interval: 10 * time.Second, Timeout: 6 * time.Second, Rise: 2, Fall: 2}
}

// GCPTiming returns the GCP L4 defaults for a Local Service: every 8s,
// timeout 1s, healthy threshold 1, unhealthy threshold 3 ("3 * 8 = 24
// seconds before the LB will steer traffic away").
func GCPTiming() Timing {
	return Timing{Interval: 8 * time.Second, Timeout: time.Second, Rise: 1, Fall: 3}
}

// AzureTiming returns cloud-provider-azure's probe defaults: every 5s,
// 2 probes to fail. Azure has no separate timeout or healthy threshold; this
// preset uses the interval and 1.
func AzureTiming() Timing {
	return Timing{Interval: 5 * time.Second, Timeout: 5 * time.Second, Rise: 1, Fall: 2}
}

func (t Timing) validate() error {
	switch {
	case t.Interval <= 0:
		return fmt.Errorf("%w: Interval %v must be positive", ErrInvalidConfig, t.Interval)
	case t.Timeout < 0 || t.Timeout > t.Interval:
		return fmt.Errorf("%w: Timeout %v must be between 0 and Interval %v", ErrInvalidConfig, t.Timeout, t.Interval)
	case t.Rise < 1 || t.Fall < 1:
		return fmt.Errorf("%w: Rise %d and Fall %d must be at least 1", ErrInvalidConfig, t.Rise, t.Fall)
	}
	return nil
}

func (t Timing) timeout() time.Duration {
	if t.Timeout == 0 {
		return t.Interval
	}
	return t.Timeout
}

// Window is a span of time known only within bounds: it lasts at least Min
// and at most Max.
type Window struct {
	Min, Max time.Duration
}

// Contains reports whether d lies within the window, bounds included.
func (w Window) Contains(d time.Duration) bool { return w.Min <= d && d <= w.Max }

// String returns the bounds as "Min…Max" ("10s…15s").
func (w Window) String() string { return w.Min.String() + "…" + w.Max.String() }

// BlackHole returns how long a load balancer keeps sending new connections
// to a node after the node's last ready local endpoint goes away. From that
// moment the node drops them (KUBE-EXTERNAL-SERVICES DROP) and its health
// check answers 503, but the load balancer only stops at its Fall-th
// consecutive failed probe. The first failing probe comes between 0 and one
// Interval after the change, so the window is Interval × Fall minus up to
// one Interval: Min = (Fall−1) × Interval, Max = Fall × Interval.
//
// The bounds assume the health answer changes at the same moment as the
// rules (kube-proxy updates both in one sync) and that a 503 arrives well
// within Timeout; add the load balancer's own propagation delay, which the
// clouds do not publish, to both. Terminating endpoints soften the edge:
// kube-proxy keeps forwarding to a serving, terminating local endpoint while
// the health check already fails, so a graceful shutdown longer than Max
// drops nothing.
func (t Timing) BlackHole() Window {
	return Window{Min: time.Duration(t.Fall-1) * t.Interval, Max: time.Duration(t.Fall) * t.Interval}
}

// Rejoin returns how long a node with a ready local endpoint again (its
// health check answers 200) waits before the load balancer sends it new
// connections: Rise probes, the first within one Interval, so
// Min = (Rise−1) × Interval and Max = Rise × Interval. Nothing is dropped
// meanwhile; the node is merely unused.
func (t Timing) Rejoin() Window {
	return Window{Min: time.Duration(t.Rise-1) * t.Interval, Max: time.Duration(t.Rise) * t.Interval}
}

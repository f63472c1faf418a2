package kubeproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Agent is a running agent, seen from the lab.
type Agent struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	dec    *json.Decoder
	log    *tail
	exited chan struct{}

	mu sync.Mutex // one request at a time
}

// Start starts an agent for cfg in network namespace ns, from the running
// executable, whose main (or TestMain) must call [RunAgent] when
// [AgentEnv] is set. The agent dies with the lab (SIGKILL on the lab's
// death) and is ended by [Agent.Stop].
func Start(ctx context.Context, ns string, cfg Config) (*Agent, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	a := &Agent{log: &tail{max: 64 << 10}, exited: make(chan struct{})}
	a.cmd = exec.Command("ip", "netns", "exec", ns, exe)
	a.cmd.Env = append(os.Environ(), AgentEnv+"="+string(js))
	a.cmd.Stderr = a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := a.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	a.dec = json.NewDecoder(bufio.NewReader(out))
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kube-proxy agent: %w", err)
	}
	go func() {
		a.cmd.Wait()
		close(a.exited)
	}()
	return a, nil
}

// Do sends req and waits for its reply: for a Service or EndpointSlices,
// until kube-proxy has synced them in every family. The reply's error, if
// any, is returned as an error too.
func (a *Agent) Do(ctx context.Context, req Request) (Reply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := json.NewEncoder(a.stdin).Encode(req); err != nil {
		return Reply{}, fmt.Errorf("kube-proxy agent: %w (log: %s)", err, a.Log())
	}
	type result struct {
		rep Reply
		err error
	}
	res := make(chan result, 1)
	go func() {
		var r Reply
		err := a.dec.Decode(&r)
		res <- result{r, err}
	}()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	select {
	case r := <-res:
		if r.err != nil {
			return Reply{}, fmt.Errorf("kube-proxy agent: %w (log: %s)", r.err, a.Log())
		}
		if r.rep.Err != "" {
			return r.rep, fmt.Errorf("kube-proxy agent: %s (log: %s)", r.rep.Err, a.Log())
		}
		return r.rep, nil
	case <-ctx.Done():
		a.kill()
		return Reply{}, fmt.Errorf("kube-proxy agent: no reply: %w (log: %s)", ctx.Err(), a.Log())
	}
}

// SyncedAt returns when the last family's sync of a reply finished.
func (r Reply) SyncedAt() time.Time {
	var last int64
	for _, t := range r.Synced {
		last = max(last, t)
	}
	return time.Unix(0, last)
}

// FirstSyncedAt returns when the first family's sync of a reply finished.
func (r Reply) FirstSyncedAt() time.Time {
	var first int64
	for _, t := range r.Synced {
		if first == 0 || t < first {
			first = t
		}
	}
	return time.Unix(0, first)
}

// Stop ends the agent: its input closes, it returns, and after a grace
// period it is killed.
func (a *Agent) Stop() {
	if a == nil {
		return
	}
	a.stdin.Close()
	select {
	case <-a.exited:
	case <-time.After(3 * time.Second):
		a.kill()
	}
}

func (a *Agent) kill() {
	if a.cmd.Process != nil {
		a.cmd.Process.Kill()
	}
	<-a.exited
}

// Log returns the end of the agent's error output.
func (a *Agent) Log() string { return strings.TrimSpace(a.log.String()) }

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// DecodeService reads a v1 Service from a YAML or JSON manifest holding
// exactly that object, as the API server would store it (unknown fields
// are an error).
func DecodeService(data []byte) (*v1.Service, error) {
	var s v1.Service
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("service manifest: %w", err)
	}
	if s.Kind != "Service" || s.APIVersion != "v1" {
		return nil, fmt.Errorf("service manifest: kind %q, apiVersion %q", s.Kind, s.APIVersion)
	}
	return &s, nil
}

// Endpoint is one endpoint of the Service, as an EndpointSlice lists it.
type Endpoint struct {
	Addr                        netip.Addr
	Node                        string
	Ready, Serving, Terminating bool
}

// Slices returns the EndpointSlices of svc for eps: one per address
// family, named <service>-ipv4 and <service>-ipv6, with one port named
// portName on targetPort.
func Slices(svc *v1.Service, portName string, targetPort int32, eps []Endpoint) []*discovery.EndpointSlice {
	mk := func(t discovery.AddressType) *discovery.EndpointSlice {
		proto := v1.ProtocolTCP
		return &discovery.EndpointSlice{
			TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: svc.Namespace,
				Name:      svc.Name + "-" + strings.ToLower(string(t)),
				Labels:    map[string]string{discovery.LabelServiceName: svc.Name, discovery.LabelManagedBy: "policylab"},
			},
			AddressType: t,
			Ports:       []discovery.EndpointPort{{Name: &portName, Protocol: &proto, Port: &targetPort}},
			Endpoints:   []discovery.Endpoint{},
		}
	}
	v4, v6 := mk(discovery.AddressTypeIPv4), mk(discovery.AddressTypeIPv6)
	for _, e := range eps {
		s := v4
		if e.Addr.Is6() {
			s = v6
		}
		node := e.Node
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{e.Addr.String()},
			Conditions: discovery.EndpointConditions{Ready: &e.Ready, Serving: &e.Serving, Terminating: &e.Terminating},
			NodeName:   &node,
		})
	}
	return []*discovery.EndpointSlice{v4, v6}
}

// NodeState is what the lab says about a node.
type NodeState struct {
	Deleting bool
	Taints   []string
}

// NodeObject returns the Node named name with its InternalIP addresses and
// state.
func NodeObject(name string, ips []netip.Addr, st NodeState) *v1.Node {
	n := &v1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	if st.Deleting {
		now := metav1.Now()
		n.DeletionTimestamp = &now
	}
	for _, t := range st.Taints {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: t, Effect: v1.TaintEffectNoSchedule})
	}
	return n
}

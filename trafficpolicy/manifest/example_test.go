package manifest_test

import (
	"fmt"
	"log"
	"os"

	"github.com/sourceip/sourceip/trafficpolicy/manifest"
)

// Print the policy matrix an operator should keep next to a Service.
func ExampleRenderMatrix() {
	data := []byte(`
apiVersion: v1
kind: Service
metadata:
  name: mqtt-gw
  namespace: iot
  annotations:
    service.beta.kubernetes.io/aws-load-balancer-proxy-protocol: "*"
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  ports:
  - {name: mqtts, port: 8883, nodePort: 31883}
`)
	svc, err := manifest.Parse(data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s/%s: load balancer %s (from %s)\n\n", svc.Namespace, svc.Name, svc.LB, svc.LBHint)
	if err := manifest.RenderMatrix(os.Stdout, svc.Matrix()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// iot/mqtt-gw: load balancer ProxyProtocol (from service.beta.kubernetes.io/aws-load-balancer-proxy-protocol)
	//
	// | Service | Policy | Caller | Path | Backend sees | Client survives | clientip | Health check | No local endpoint |
	// | --- | --- | --- | --- | --- | --- | --- | --- | --- |
	// | LoadBalancer | internal Cluster | pod | pod → cluster IP → KUBE-SVC → any endpoint | client | yes, socket | trust nothing [1] | endpoint readiness only | other nodes' endpoints |
	// | LoadBalancer | external Local | external client | client → node port → KUBE-EXT → KUBE-SVL → local endpoint | client | yes, socket | trust nothing | none: the caller picks the node | dropped |
	// | LoadBalancer | external Local | external client | client → LB (L4 + PROXY protocol) → node → KUBE-EXT → KUBE-SVL → local endpoint | load-balancer address | yes, PROXY header | trust load-balancers, PROXY listener | LB probes healthCheckNodePort | dropped; the LB health check (503) steers traffic away |
	// | LoadBalancer | external Local | pod | pod → LB IP, captured on the pod's node → KUBE-EXT (pod short-circuit) → KUBE-SVC → any endpoint | client | yes, socket | trust nothing [2] | endpoint readiness only | other nodes' endpoints (short-circuit ignores Local) |
	//
	// 1. A pod reaching itself through the Service is masqueraded (hairpin).
	// 2. No PROXY header arrives on this path: the pod connects from its own address, served as a direct client while the pod network is not a trusted upstream (or set ipMode: Proxy).
}

package mqttwire_test

import (
	"errors"
	"fmt"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// A server's read loop: split the packets off what was read, parse each, append the answers into one
// write buffer. Nothing here allocates once the buffers have grown.
func ExampleSplit() {
	in := []byte{
		0x32, 0x0C, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x07, 0x00, '2', '1', '.', '5', // PUBLISH QoS 1, id 7
		0xC0, 0x00, // PINGREQ
		0x30, 0x05, 0x00, 0x03, 'a', '/', '#', // PUBLISH to a wildcard: refused
	}
	var out []byte
	for len(in) > 0 {
		typ, flags, body, n, err := mqttwire.Split(in, 1024)
		if err != nil || n == 0 {
			fmt.Println("split:", err, n)
			break
		}
		in = in[n:]
		switch typ {
		case mqttwire.PUBLISH:
			p, err := mqttwire.ParsePublish(flags, body, true)
			var refusal *mqttwire.Error
			if errors.As(err, &refusal) {
				fmt.Printf("refused: %v\n", refusal)
				out = mqttwire.AppendDisconnect(out, refusal.Code, "")
				continue
			}
			fmt.Printf("publish %s qos %d id %d: %s\n", p.Topic, p.QoS, p.PacketID, p.Payload)
			out = mqttwire.AppendAck(out, mqttwire.PUBACK, p.PacketID, mqttwire.Success, "", true)
		case mqttwire.PINGREQ:
			out = mqttwire.AppendPingresp(out)
		}
	}
	fmt.Printf("answer % x\n", out)
	// Output:
	// publish a/b qos 1 id 7: 21.5
	// refused: mqttwire: PUBLISH: wildcard in topic name [MQTT-3.3.2-2] (0x90 Topic Name invalid)
	// answer 40 02 00 07 d0 00 e0 01 90
}

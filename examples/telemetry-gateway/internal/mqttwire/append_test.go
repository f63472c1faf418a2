package mqttwire

import (
	"strings"
	"testing"
	"unicode/utf8"

	paho5 "github.com/eclipse/paho.golang/packets"
	"github.com/stretchr/testify/require"
)

// The exact bytes of the server's packets, read off the specifications' figures.
func TestAppendBytes(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"CONNACK 3.1.1 accepted (MQTT 3.1.1 §3.2)", AppendConnack(nil, false, false, 0, nil), []byte{0x20, 2, 0, 0}},
		{"CONNACK 3.1.1 session present", AppendConnack(nil, false, true, 0, nil), []byte{0x20, 2, 1, 0}},
		{"CONNACK 3.1.1 refused, bad user name or password (§3.2.2.3)",
			AppendConnack(nil, false, false, ConnRefusedBadUserNameOrPassword, nil), []byte{0x20, 2, 0, 4}},
		{"CONNACK 5 without properties (MQTT 5 §3.2.2.3: Property Length 0)", AppendConnack(nil, true, false, Success, nil),
			[]byte{0x20, 3, 0, 0, 0}},
		{"CONNACK 5 Receive Maximum and Topic Alias Maximum (MQTT 5 §3.2.2.3.3, §3.2.2.3.8)",
			AppendConnack(nil, true, false, Success, &ConnackProps{ReceiveMaximum: 16, TopicAliasMax: 4, MaximumQoS: 2}),
			[]byte{0x20, 9, 0, 0, 6, 0x21, 0, 16, 0x22, 0, 4}},
		{"PUBACK 3.1.1 (MQTT 3.1.1 §3.4)", AppendAck(nil, PUBACK, 0x0102, 0x80, "", false), []byte{0x40, 2, 1, 2}},
		{"PUBACK 5 success is 4 bytes (MQTT 5 §3.4.2.1)", AppendAck(nil, PUBACK, 0x0102, Success, "", true), []byte{0x40, 2, 1, 2}},
		{"PUBACK 5 reason code without properties (MQTT 5 §3.4.2.2.1)",
			AppendAck(nil, PUBACK, 0x0102, QuotaExceeded, "", true), []byte{0x40, 3, 1, 2, 0x97}},
		{"PUBACK 5 success with Reason String", AppendAck(nil, PUBACK, 1, Success, "ok", true),
			[]byte{0x40, 9, 0, 1, 0, 5, 0x1F, 0, 2, 'o', 'k'}},
		{"PUBREL flags 0010 [MQTT-3.6.1-1]", AppendAck(nil, PUBREL, 1, Success, "", true), []byte{0x62, 2, 0, 1}},
		{"PUBREC 5 (MQTT 5 §3.5)", AppendAck(nil, PUBREC, 1, NotAuthorized, "", true), []byte{0x50, 3, 0, 1, 0x87}},
		{"PUBCOMP 5 (MQTT 5 §3.7)", AppendAck(nil, PUBCOMP, 1, PacketIdentifierNotFound, "", true), []byte{0x70, 3, 0, 1, 0x92}},
		{"SUBACK 3.1.1 failure for two filters (MQTT 3.1.1 §3.9.3)", AppendSuback(nil, 9, 2, 0x80, false),
			[]byte{0x90, 4, 0, 9, 0x80, 0x80}},
		{"SUBACK 5 with empty properties (MQTT 5 §3.9)", AppendSuback(nil, 9, 1, NotAuthorized, true),
			[]byte{0x90, 4, 0, 9, 0, 0x87}},
		{"SUBACK n < 0 counts as 0", AppendSuback(nil, 9, -5, 0x80, false), []byte{0x90, 2, 0, 9}},
		{"UNSUBACK 3.1.1 (MQTT 3.1.1 §3.11)", AppendUnsuback(nil, 9, 3, 0x80, false), []byte{0xB0, 2, 0, 9}},
		{"UNSUBACK 5 (MQTT 5 §3.11)", AppendUnsuback(nil, 9, 2, NoSubscriptionExisted, true),
			[]byte{0xB0, 5, 0, 9, 0, 0x11, 0x11}},
		{"PINGRESP (§3.13)", AppendPingresp(nil), []byte{0xD0, 0}},
		{"DISCONNECT 5 (MQTT 5 §3.14)", AppendDisconnect(nil, ServerBusy, ""), []byte{0xE0, 1, 0x89}},
		{"DISCONNECT 5 with Reason String (MQTT 5 §3.14.2.2.3)", AppendDisconnect(nil, AdministrativeAction, "x"),
			[]byte{0xE0, 6, 0x98, 4, 0x1F, 0, 1, 'x'}},
		{"appends after what dst holds", AppendPingresp([]byte{0xAA}), []byte{0xAA, 0xD0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.got)
		})
	}
}

// What the server writes, the codec itself splits back into one whole packet.
func TestAppendSplitsBack(t *testing.T) {
	long := strings.Repeat("é", 40000) // 80,000 bytes: over the 65,535 a string holds
	for _, b := range [][]byte{
		AppendConnack(nil, true, false, Success, &ConnackProps{AssignedClientID: long, ReasonString: long}),
		AppendAck(nil, PUBACK, 1, UnspecifiedError, long, true),
		AppendDisconnect(nil, UnspecifiedError, long),
		AppendSuback(nil, 1, 300, 0x80, true),
		AppendUnsuback(nil, 1, 20000, NoSubscriptionExisted, true),
	} {
		_, _, _, n, err := Split(b, len(b))
		require.NoError(t, err)
		require.Equal(t, len(b), n)
	}
}

// An over-long reason string is cut at a rune boundary to the 65,535 bytes a string holds (MQTT 5
// §1.5.4), so the packet stays well-formed.
func TestAppendClipsLongStrings(t *testing.T) {
	for _, tc := range []struct {
		long    string
		wantLen int
	}{
		{"a" + strings.Repeat("é", 40000), 65535}, // 1 + 2×32,767 bytes: the cut falls between runes
		{strings.Repeat("é", 40000), 65534},       // byte 65,535 is inside an 'é': cut before it
	} {
		reason := read5(t, AppendAck(nil, PUBACK, 1, UnspecifiedError, tc.long, true)).Content.(*paho5.Puback).Properties.ReasonString
		require.Len(t, reason, tc.wantLen)
		require.True(t, utf8.ValidString(reason))
		require.Equal(t, tc.long[:tc.wantLen], reason)
	}
}

// AppendAck, AppendConnack and the others do not allocate when dst has room.
func TestAppendNoAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	props := &ConnackProps{ReceiveMaximum: 16, TopicAliasMax: 8, MaximumQoS: 1, AssignedClientID: "id", ReasonString: "r"}
	allocs := testing.AllocsPerRun(100, func() {
		b := AppendAck(buf[:0], PUBACK, 7, QuotaExceeded, "quota", true)
		b = AppendAck(b, PUBACK, 8, Success, "", true)
		b = AppendConnack(b, true, false, Success, props)
		b = AppendSuback(b, 1, 3, NotAuthorized, true)
		b = AppendUnsuback(b, 1, 3, NoSubscriptionExisted, true)
		b = AppendDisconnect(b, ServerShuttingDown, "bye")
		_ = AppendPingresp(b)
	})
	require.Zero(t, allocs)
}

package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// AppendJSON appends rec's JSON encoding to b: the bytes json.Marshal
// produces for it (TestAppendJSONIsMarshal), without reflection, since every
// reading is encoded once on its way to the sink or to JetStream.
//
// Payload must be valid JSON without insignificant white space, as
// reading.Parse returns it: json.Marshal would refuse invalid JSON and
// compact the rest, AppendJSON only escapes <, >, & and U+2028/U+2029 in it
// as json.Marshal does. A Received outside the years 0 to 9999 is an error,
// as for json.Marshal.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	if y := r.Received.Year(); y < 0 || y > 9999 {
		return b, errors.New("sink: Record.Received: year outside of range [0,9999]")
	}
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"device":`...)
	b = appendString(b, r.Device)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"received":"`...)
	b = r.Received.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","protocol":`...)
	b = appendString(b, r.Protocol)
	if r.Topic != "" {
		b = append(b, `,"topic":`...)
		b = appendString(b, r.Topic)
	}
	if r.QoS != 0 {
		b = append(b, `,"qos":`...)
		b = strconv.AppendUint(b, uint64(r.QoS), 10)
	}
	b = append(b, `,"payload":`...)
	b = appendRaw(b, r.Payload)
	b = append(b, `,"provenance":`...)
	b = r.Provenance.appendJSON(b)
	return append(b, '}'), nil
}

func (p *Provenance) appendJSON(b []byte) []byte {
	if p.enc != nil {
		return append(b, p.enc...)
	}
	b = append(b, '{')
	if p.Client != "" {
		b = append(b, `"client":`...)
		b = appendString(b, p.Client)
		b = append(b, ',')
	}
	b = append(b, `"source":`...)
	b = appendString(b, p.Source)
	if p.Masqueraded {
		b = append(b, `,"masqueraded":true`...)
	}
	for _, f := range [...]struct{ key, v string }{
		{`,"via":`, p.Via}, {`,"socket_peer":`, p.Peer}, {`,"proxy_source":`, p.ProxySource},
		{`,"proxy_destination":`, p.ProxyDestination}, {`,"header":`, p.Header}, {`,"transport":`, p.Transport},
		{`,"tls_sni":`, p.TLSServerName}, {`,"tls_subject":`, p.TLSSubject}, {`,"tls_terminated_by":`, p.TLSTerminatedBy},
		{`,"tls_version":`, p.TLSVersion}, {`,"tls_identity":`, p.TLSIdentity}, {`,"client_id":`, p.ClientID},
	} {
		if f.v != "" {
			b = append(b, f.key...)
			b = appendString(b, f.v)
		}
	}
	if p.Conn != 0 {
		b = append(b, `,"conn":`...)
		b = strconv.AppendUint(b, p.Conn, 10)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string. Strings of printable ASCII
// without a character json.Marshal escapes (", \, <, >, &) are copied; any
// other goes through json.Marshal, so that the escapes are its own.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendRaw appends a compact JSON value with json.Marshal's HTML escapes;
// empty is null, as json.Marshal encodes a nil json.RawMessage.
func appendRaw(b, raw []byte) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if bytes.IndexAny(raw, "<>&\u2028\u2029") < 0 {
		return append(b, raw...)
	}
	var buf bytes.Buffer
	json.HTMLEscape(&buf, raw)
	return append(b, buf.Bytes()...)
}

package sink

import (
	"encoding/json"
	"strconv"
	"time"
)

// Record is one accepted telemetry message with its provenance: one line of
// the sink.
type Record struct {
	// ID is the message id, "device/seq".
	ID       string    `json:"id"`
	Device   string    `json:"device"`
	Seq      uint64    `json:"seq"`
	Received time.Time `json:"received"`
	// Protocol is "mqtt" or "http".
	Protocol string `json:"protocol"`
	// Topic and QoS are the MQTT topic and QoS level.
	Topic string `json:"topic,omitempty"`
	QoS   byte   `json:"qos,omitempty"`
	// Payload is the reading exactly as validated, in compact form.
	Payload    json.RawMessage `json:"payload"`
	Provenance Provenance      `json:"provenance"`
}

// Provenance is what every layer showed about the message's sender.
type Provenance struct {
	// Client is the address clientip resolved, Source the layer it came
	// from ("socket", "proxy-protocol", "x-forwarded-for", …), and
	// Masqueraded whether it is a node standing in for the real client.
	Client      string `json:"client,omitempty"`
	Source      string `json:"source"`
	Masqueraded bool   `json:"masqueraded,omitempty"`
	// Via is the trusted hop that reported Client.
	Via string `json:"via,omitempty"`
	// Peer is the socket peer (the load balancer or proxy, when there is one).
	Peer string `json:"socket_peer,omitempty"`
	// ProxySource and ProxyDestination are the PROXY protocol header's
	// addresses.
	ProxySource      string `json:"proxy_source,omitempty"`
	ProxyDestination string `json:"proxy_destination,omitempty"`
	// Header is the forwarding header the client came from (HTTP, MQTT
	// over WebSocket).
	Header string `json:"header,omitempty"`
	// Transport is "websocket" for MQTT over WebSocket, "" otherwise.
	Transport string `json:"transport,omitempty"`
	// TLSServerName is the SNI the client sent; TLSSubject its certificate's
	// subject.
	TLSServerName string `json:"tls_sni,omitempty"`
	TLSSubject    string `json:"tls_subject,omitempty"`
	// TLSTerminatedBy is the load balancer that terminated the client's TLS
	// and reported it in the PROXY header (TLS at the load balancer), with
	// the TLS version it reported and where the subject came from:
	// "certificate" (forwarded, and verified by the gateway against its own
	// client CA) or "cn" (the common name the load balancer reported). They
	// are empty when the gateway terminated TLS itself.
	TLSTerminatedBy string `json:"tls_terminated_by,omitempty"`
	TLSVersion      string `json:"tls_version,omitempty"`
	TLSIdentity     string `json:"tls_identity,omitempty"`
	// ClientID is the MQTT client identifier; Conn the gateway's connection id.
	ClientID string `json:"client_id,omitempty"`
	Conn     uint64 `json:"conn,omitempty"`

	enc []byte // its JSON, from Precompute
}

// Precompute encodes p once, for a provenance many records share (every
// reading of one connection has the same): the records then copy these
// bytes instead of encoding every field again. Call it once p is complete;
// it encodes the fields as they are now, so call it again after changing
// one.
func (p *Provenance) Precompute() {
	p.enc = nil
	p.enc = p.appendJSON(nil)
}

// Key returns the message id of device and seq, "device/seq".
func Key(device string, seq uint64) string {
	return device + "/" + strconv.FormatUint(seq, 10)
}

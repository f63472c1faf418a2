// Package mqttwire is the MQTT 3.1.1 and MQTT 5 wire codec of the telemetry gateway's own ingest
// server: it splits a byte stream into control packets, parses the packets a client sends, and appends
// the packets the server answers with.
//
// Threat model: every byte comes from an untrusted device. The codec never panics on any input, never
// reads outside the buffer it is given, allocates nothing on the hot path ([Split], [ParsePublish] and
// the Append functions into a buffer with room) and refuses a packet the specifications call malformed
// or a protocol error with an [*Error] whose Code is the MQTT 5 reason code a server answers it with
// (an MQTT 3.1.1 server just closes the connection). [Split] bounds the memory a client can make the
// server hold: a packet announcing more than the server's maximum is refused as soon as its length is
// known, before its body arrives.
//
// Parsed values alias the buffer they were parsed from (topics, payloads, user names, passwords):
// copy what outlives the buffer. All functions are safe for concurrent use; they keep no state.
//
// Specifications: MQTT Version 3.1.1 (OASIS Standard, 29 October 2014) and MQTT Version 5.0 (OASIS
// Standard, 7 March 2019), cited as "MQTT 3.1.1 §x.y" and "MQTT 5 §x.y", normative statements as
// [MQTT-x.y.z-n].
package mqttwire

package gateway

import (
	"net"
	"net/http"
	"strconv"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/sourceip/sourceip/explain"
)

// mountExplain serves GET /debug/clientip/conn on the admin mux when
// Config.ExplainAllow names who may see it: the explanation of one open
// MQTT connection, named by ?conn=<connection number> or ?client=<client
// id>, as the explain package renders it (JSON, or text for curl). Anyone
// else gets 404, as if nothing were mounted.
func (g *Gateway) mountExplain(mux *http.ServeMux) error {
	if g.cfg.ExplainAllow.Len() == 0 {
		return nil
	}
	h, err := explain.New(explain.Config{Trust: g.mqttTrust, AllowPeers: g.cfg.ExplainAllow})
	if err != nil {
		return err
	}
	mux.HandleFunc("GET /debug/clientip/conn", func(w http.ResponseWriter, r *http.Request) {
		if h.Check(r) != nil {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		c, id, ok := g.hook.find(q.Get("conn"), q.Get("client"))
		if !ok {
			http.Error(w, "no open MQTT connection with that conn or client id", http.StatusNotFound)
			return
		}
		h.ServeConn(w, r, c, id)
	})
	return nil
}

// find returns the network connection of the open session whose
// connection number is conn or whose client id is client, and a name for
// it.
func (h *hook) find(conn, client string) (net.Conn, string, bool) {
	num, err := strconv.ParseUint(conn, 10, 64)
	if conn != "" && err != nil {
		return nil, "", false
	}
	var found net.Conn
	var name string
	h.sessions.Range(func(k, v any) bool {
		cl, s := k.(*mqtt.Client), v.(*session)
		if conn != "" && s.conn.Conn == num || conn == "" && client != "" && s.conn.ClientID == client {
			found, name = cl.Net.Conn, "conn "+strconv.FormatUint(s.conn.Conn, 10)+" client "+s.conn.ClientID
			return false
		}
		return true
	})
	return found, name, found != nil
}

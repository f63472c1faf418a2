package middleware

import (
	"context"
	"testing"

	"github.com/sourceip/sourceip/clientip"
)

func TestMultiObserver(t *testing.T) {
	if MultiObserver() != nil || MultiObserver(nil, nil) != nil {
		t.Error("MultiObserver of nothing is not nil")
	}
	a := &recordingObserver{}
	if MultiObserver(nil, a) != Observer(a) {
		t.Error("MultiObserver of one observer does not return it")
	}
	b := &recordingObserver{}
	m := MultiObserver(a, nil, b)
	m.ObserveResolve(context.Background(), clientip.Result{}, nil)
	m.ObserveDeny(context.Background(), clientip.Result{}, ErrNotAllowed)
	for i, o := range []*recordingObserver{a, b} {
		got := o.take()
		if len(got) != 2 || got[0].kind != "resolve" || got[1].kind != "deny" {
			t.Errorf("observer %d saw %+v", i, got)
		}
	}
}

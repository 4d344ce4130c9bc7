//go:build js && wasm && !tabfence_core && !tabfence_noconnection

package connection

import (
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/realtime/browser"
	"github.com/tabfence/tabfence/wasm/jsapi"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// The connection's values as JavaScript objects (the d.ts's
// ConnectionStatus, PendingMutation, MutationAck, Delta). JSON (changes,
// payloads, results) is parsed by the JavaScript engine, never by a Go
// decoder.

// connStatusJS is a ConnectionStatus.
func connStatusJS(st browser.Status) js.Value {
	o := jsapi.NewObject()
	o.Set("leader", st.Leader)
	o.Set("state", jsapi.Recurring.Get(string(st.State)))
	o.Set("version", float64(st.Version))
	o.Set("pending", st.Pending)
	o.Set("oldestPendingAgeMs", float64(st.OldestPending)/1e6)
	o.Set("token", float64(st.Token))
	o.Set("leaderId", st.LeaderID)
	o.Set("id", st.ID)
	o.Set("lastError", orNull(st.LastError))
	o.Set("closed", orNull(string(st.Closed)))
	o.Set("offline", st.Offline)
	return o
}

// orNull is s, or null when it is empty.
func orNull(s string) any {
	if s == "" {
		return js.Null()
	}
	return jsapi.Recurring.Get(s)
}

// pendingJS is a PendingMutation[].
func pendingJS(list []browser.PendingMutation) js.Value {
	arr := jsapi.JSArray.New(len(list))
	for i, p := range list {
		o := jsapi.NewObject()
		o.Set("id", p.ID)
		o.Set("op", jsapi.Recurring.Get(p.Op))
		o.Set("entity", p.Entity)
		o.Set("payload", jsapi.PayloadValue(p.Payload))
		o.Set("madeAt", jsapi.Ms(p.MadeAt))
		arr.SetIndex(i, o)
	}
	return arr
}

// ackJS is a MutationAck.
func ackJS(a rt.Ack) js.Value {
	o := jsapi.NewObject()
	o.Set("id", a.ID)
	o.Set("status", float64(a.Status))
	o.Set("replayed", a.Replayed)
	if len(a.Result) == 0 {
		o.Set("result", js.Null())
	} else {
		o.Set("result", jsapi.PayloadValue(a.Result))
	}
	return o
}

// problemJS is a MutationRejectedError's problem.
func problemJS(p rt.Problem) js.Value {
	o := jsapi.NewObject()
	o.Set("type", p.Type)
	o.Set("title", p.Title)
	o.Set("detail", p.Detail)
	o.Set("status", float64(p.Status))
	return o
}

// deltaJS is a Delta: its change list parsed (the runtime validated it
// before the replica took it; an unparsable one would be an empty list).
func deltaJS(d rt.Delta) js.Value {
	o := jsapi.NewObject()
	o.Set("version", float64(d.Version))
	changes, err := jsglue.Call(jsapi.JSJSON, "parse", string(d.Changes))
	if err != nil || !jsglue.IsArray(changes) {
		changes = jsapi.JSArray.New()
	}
	o.Set("changes", changes)
	return o
}

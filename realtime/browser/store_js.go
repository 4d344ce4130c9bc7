//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// errStale: the leader's fenced write was refused; it steps down.
var errStale = errors.New("realtime/browser: stale leader")

// openDB opens the replica's database: the replica stores (out-of-line
// keys) at SchemaVersion, and the runtime's own stores.
func openDB(ctx context.Context, cfg Config, name string, events func(idb.Event)) (*idb.DB, error) {
	stores := cfg.Stores
	schema := idb.Schema{Steps: []idb.Step{{Version: uint64(cfg.SchemaVersion), Upgrade: func(tx *idb.UpgradeTx) error {
		for _, s := range stores {
			if !tx.HasStore(s) {
				if err := tx.CreateStore(s, idb.StoreOptions{}); err != nil {
					return err
				}
			}
		}
		return nil
	}}}}
	return idb.Open(ctx, name, idb.WithSchema(schema), idb.WithEvents(events),
		idb.WithOwnStores(StoreMeta, StorePending))
}

// loaded is what a tab reads at open, and a new leader before it leads.
type loaded struct {
	version uint64
	offline bool
	pending []PendingMutation
}

func (c *Conn) load(ctx context.Context) (loaded, error) {
	var out loaded
	tx, err := raw.Begin(c.db.JS(), []string{StoreMeta, StorePending}, raw.ReadOnly)
	if err != nil {
		return out, err
	}
	meta := tx.Store(StoreMeta)
	vr, or := meta.Get(js.ValueOf(metaVersion)), meta.Get(js.ValueOf(metaOffline))
	all, err := tx.Store(StorePending).GetAll(js.Undefined(), 0).AwaitFresh(ctx)
	if err != nil {
		return out, err
	}
	v, _ := vr.Result()
	if typeOf(v) == js.TypeNumber && v.Float() >= 0 {
		out.version = uint64(v.Float())
	}
	o, _ := or.Result()
	out.offline = typeOf(o) == js.TypeBoolean && o.Bool()
	for i := 0; i < jsglue.Len(all); i++ {
		if pm, ok := decodePending(all.Index(i)); ok {
			out.pending = append(out.pending, pm)
		}
	}
	sortPending(out.pending)
	return out, nil
}

func encodePending(m rt.Mutation, madeAt time.Time) js.Value {
	o := js.Global().Get("Object").New()
	o.Set("id", m.ID)
	o.Set("op", m.Op)
	o.Set("entity", m.Entity)
	o.Set("payload", jsglue.Bytes(m.Payload))
	o.Set("madeAt", float64(madeAt.UnixMilli()))
	return o
}

// decodePending reads a pending record or an rt.mutation payload (both
// untrusted: another build, another script), validated by checkMutation.
func decodePending(v js.Value) (PendingMutation, bool) {
	if typeOf(v) != js.TypeObject {
		return PendingMutation{}, false
	}
	str := func(k string) (string, bool) { return jsString(v.Get(k), maxField) }
	id, ok1 := str("id")
	op, ok2 := str("op")
	entity, ok3 := str("entity")
	p, at := v.Get("payload"), v.Get("madeAt")
	if !ok1 || !ok2 || !ok3 || !jsglue.InstanceOf(p, js.Global().Get("Uint8Array")) || typeOf(at) != js.TypeNumber {
		return PendingMutation{}, false
	}
	if p.Length() > rt.MaxMessage/2 {
		return PendingMutation{}, false
	}
	b := make([]byte, p.Length())
	js.CopyBytesToGo(b, p)
	m := rt.Mutation{ID: id, Op: op, Entity: entity, Payload: b}
	if checkMutation(m) != nil {
		return PendingMutation{}, false
	}
	return PendingMutation{Mutation: Mutation{ID: id, Op: op, Entity: entity, Payload: b}, MadeAt: time.UnixMilli(int64(at.Float()))}, true
}

// putPending stores a mutation in the durable pending store: any tab may
// (it is the tab's own request, not the leader's state), unfenced.
func (c *Conn) putPending(ctx context.Context, m rt.Mutation, madeAt time.Time) error {
	return c.write(ctx, []string{StorePending}, func(tx *raw.Tx) error {
		return tx.Store(StorePending).Put(js.ValueOf(m.ID), encodePending(m, madeAt)).Err()
	})
}

// storePending is putPending, once more after the page resumes when it
// fails (a freeze aborts the transactions open and opened while frozen): a
// put of one id twice is harmless. A second failure is ErrNotStored.
func (c *Conn) storePending(ctx context.Context, m rt.Mutation, madeAt time.Time) error {
	err := c.putPending(ctx, m, madeAt)
	if err == nil {
		return nil
	}
	if terr := raw.Thawed(ctx); terr != nil {
		return join(ErrNotStored, join(err, terr))
	}
	if err2 := c.putPending(ctx, m, madeAt); err2 != nil {
		return join(ErrNotStored, err2)
	}
	return nil
}

// browserID is this browser's random id, made once and kept in StoreMeta
// (a get and, when absent, an add in one transaction: two tabs making it
// at once keep the first).
func (c *Conn) browserID(ctx context.Context) (string, error) {
	fresh := channel.NewID()
	var got js.Value
	err := c.write(ctx, []string{StoreMeta}, func(tx *raw.Tx) error {
		st := tx.Store(StoreMeta)
		v, err := st.Get(js.ValueOf(metaBrowser)).Await(ctx)
		if err != nil {
			return err
		}
		if s, ok := jsString(v, maxField); ok && s != "" {
			got = v
			return nil
		}
		got = js.ValueOf(fresh)
		return st.Put(js.ValueOf(metaBrowser), got).Err()
	})
	if err != nil {
		return "", err
	}
	return got.String(), nil
}

// ServerResource is the resource this browser's leaders fence at the
// server (Config.FencePath; see the package's ServerResource).
func (c *Conn) ServerResource(ctx context.Context) (string, error) {
	id, err := c.browserID(ctx)
	if err != nil {
		return "", err
	}
	return ServerResource(c.cfg.Scope, c.cfg.Protocol, id)
}

// setOfflineRow stores the browser-wide offline switch (any tab).
func (c *Conn) setOfflineRow(ctx context.Context, offline bool) error {
	return c.write(ctx, []string{StoreMeta}, func(tx *raw.Tx) error {
		return tx.Store(StoreMeta).Put(js.ValueOf(metaOffline), js.ValueOf(offline)).Err()
	})
}

func (c *Conn) write(ctx context.Context, stores []string, writes func(tx *raw.Tx) error) error {
	if err := c.db.Err(); err != nil {
		return err
	}
	tx, err := raw.Begin(c.db.JS(), stores, raw.ReadWrite)
	if err != nil {
		return err
	}
	if err := writes(tx); err != nil {
		_ = tx.Abort()
		return err
	}
	_ = tx.Commit()
	return tx.Await(context.Background())
}

// fenced runs writes in one idb.Apply under the leadership's token;
// Stale (a newer leader exists) is errStale.
func (lr *leaderRun) fenced(ctx context.Context, opID string, seq uint64, stores []string, writes func(*idb.WriteTx) error) error {
	res, err := lr.c.db.Apply(ctx, idb.Op{Resource: lr.c.names.Resource, Token: lr.l.Token, OperationID: opID, Sequence: seq}, writes, stores...)
	if err != nil {
		return err
	}
	if res == idb.Stale {
		return errStale
	}
	return nil // Accepted, or Duplicate: the replica holds it already
}

// writeChanges issues the puts and deletes of a change list.
func writeChanges(tx *idb.WriteTx, changes []change) error {
	for _, ch := range changes {
		var err error
		if ch.deleted {
			err = tx.Delete(ch.store, js.ValueOf(ch.key))
		} else {
			err = tx.Put(ch.store, js.ValueOf(ch.key), ch.value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func putVersion(tx *idb.WriteTx, v uint64) error {
	return tx.Put(StoreMeta, js.ValueOf(metaVersion), js.ValueOf(float64(v)))
}

func opVersion(v uint64) string { return "v" + strconv.FormatUint(v, 10) }

// Read returns the records of one replica store.
func (c *Conn) Read(ctx context.Context, store string) ([]Record, error) {
	if !c.isStore(store) {
		return nil, joinWhy(ErrConfig, "not a replica store: "+store)
	}
	if err := c.db.Err(); err != nil {
		return nil, join(ErrClosed, err)
	}
	tx, err := raw.Begin(c.db.JS(), []string{store}, raw.ReadOnly)
	if err != nil {
		return nil, err
	}
	st := tx.Store(store)
	keys := st.GetAllKeys(js.Undefined(), 0)
	vals, err := st.GetAll(js.Undefined(), 0).AwaitFresh(ctx)
	if err != nil {
		return nil, err
	}
	ks, err := keys.Result()
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, jsglue.Len(vals))
	for i := 0; i < jsglue.Len(vals) && i < jsglue.Len(ks); i++ {
		out = append(out, Record{Key: ks.Index(i).String(), Value: vals.Index(i)})
	}
	return out, nil
}

func (c *Conn) isStore(s string) bool {
	for _, x := range c.cfg.Stores {
		if x == s {
			return true
		}
	}
	return false
}

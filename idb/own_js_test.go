//go:build js && wasm

package idb

import (
	"errors"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"
)

// A layer's own tf_ stores are created at open and written in the same
// fenced transaction as the app's; without the option they stay refused,
// and tabfence's own stores cannot be claimed.
func TestOwnStores(t *testing.T) {
	name := dbName(t)
	d := open(t, name, WithSchema(itemsSchema()), WithOwnStores("tf_layer_meta"))
	ctx := ctx5(t)
	tok, err := d.AllocateToken(ctx, "r", "me")
	require.NoError(t, err)
	res, err := d.Apply(ctx, Op{Resource: "r", Token: tok, OperationID: "o1"}, func(tx *WriteTx) error {
		if err := tx.Put("items", js.ValueOf("k"), js.ValueOf(1)); err != nil {
			return err
		}
		return tx.Put("tf_layer_meta", js.ValueOf("version"), js.ValueOf(7))
	}, "items", "tf_layer_meta")
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	v, err := d.Get(ctx, "tf_layer_meta", js.ValueOf("version"))
	require.NoError(t, err)
	require.Equal(t, 7, v.Int())
	res, err = d.Apply(ctx, Op{Resource: "r", Token: tok, OperationID: "o2"}, func(tx *WriteTx) error {
		return tx.Clear("items")
	}, "items")
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	v, err = d.Get(ctx, "items", js.ValueOf("k"))
	require.NoError(t, err)
	require.True(t, v.IsUndefined(), "cleared")

	other := open(t, dbName(t), WithSchema(itemsSchema()))
	tok2, err := other.AllocateToken(ctx, "r", "me")
	require.NoError(t, err)
	_, err = other.Apply(ctx, Op{Resource: "r", Token: tok2, OperationID: "o1"}, nil, "tf_layer_meta")
	require.True(t, errors.Is(err, ErrReservedStore), "%v", err)

	_, err = Open(ctx, dbName(t), WithOwnStores(StoreFences))
	require.True(t, errors.Is(err, ErrInvalidSchema), "%v", err)
}

package jsapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateStorageDefaults(t *testing.T) {
	str := func(s string) Arg { return Arg{Kind: KindString, Str: s} }
	cases := []struct {
		name    string
		a       StorageArgs
		elect   bool
		fenced  bool
		wantErr string
	}{
		{"elect without resource is unfenced", StorageArgs{}, true, false, ""},
		{"elect with resource is fenced", StorageArgs{Resource: str("r")}, true, true, ""},
		{"fenced false wins", StorageArgs{Resource: str("r"), Fenced: Arg{Kind: KindBoolean}}, true, false, ""},
		{"fenced true without resource", StorageArgs{Fenced: Arg{Kind: KindBoolean, Num: 1}}, true, true, ""},
		{"fenced must be boolean", StorageArgs{Fenced: str("yes")}, true, false, "fenced must be a boolean"},
		{"fence is always fenced", StorageArgs{}, false, true, ""},
		{"stores must be an array", StorageArgs{Stores: str("notes")}, false, true, "stores must be an array"},
		{"reserved store", StorageArgs{Stores: Arg{Kind: KindObject}, StoresArray: true, StoreItems: []Arg{str("tf_x")}}, false, true, "reserved"},
		{"version integer", StorageArgs{Version: Arg{Kind: KindNumber, Num: 1.5}}, false, true, "version must be"},
	}
	for _, c := range cases {
		o, err := ValidateStorage("x", c.a, c.elect)
		if c.wantErr != "" {
			assert.ErrorContains(t, err, c.wantErr, c.name)
			continue
		}
		assert.NoError(t, err, c.name)
		assert.Equal(t, c.fenced, o.Fenced, c.name)
		assert.Equal(t, DefaultDatabase, o.Database, c.name)
		assert.Equal(t, uint64(1), o.Version, c.name)
	}
	o, err := ValidateStorage("x", StorageArgs{Stores: Arg{Kind: KindObject}, StoresArray: true,
		StoreItems: []Arg{str("a"), str("b"), str("a")}}, false)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, o.Stores)
}

func TestValidateOp(t *testing.T) {
	num := func(f float64) Arg { return Arg{Kind: KindNumber, Num: f} }
	obj := Arg{Kind: KindObject}
	id := Arg{Kind: KindString, Str: "op-1"}
	o, err := ValidateOp("x", OpArgs{Op: obj, Token: num(3), OperationID: id}, 0)
	require.NoError(t, err)
	require.Equal(t, OpOptions{Token: 3, OperationID: "op-1"}, o)
	o, err = ValidateOp("x", OpArgs{Op: obj, OperationID: id, Seqnce: num(2)}, 7)
	require.NoError(t, err, "ctx default token")
	require.Equal(t, OpOptions{Token: 7, OperationID: "op-1", Sequence: 2}, o, "ctx default token")
	bad := []OpArgs{
		{Op: Arg{Kind: KindNull}},
		{Op: obj, Token: num(0), OperationID: id},
		{Op: obj, Token: num(1 << 60), OperationID: id},
		{Op: obj, Token: num(1.5), OperationID: id},
		{Op: obj, Token: num(1), OperationID: Arg{Kind: KindString}},
		{Op: obj, Token: num(1), OperationID: Arg{Kind: KindString, Str: "a\nb"}},
		{Op: obj, Token: num(1), OperationID: id, Seqnce: num(0)},
	}
	for i, a := range bad {
		_, err := ValidateOp("x", a, 0)
		assert.Error(t, err, "case %d accepted", i)
	}
	_, err = ValidateOp("x", OpArgs{Op: obj, Token: num(6), OperationID: id}, 7)
	assert.Error(t, err, "a leader context accepted another token")
}

func TestValidateWrite(t *testing.T) {
	s := func(v string) Arg { return Arg{Kind: KindString, Str: v} }
	obj, undef := Arg{Kind: KindObject}, Arg{}
	store, k, err := ValidateWrite("x", 0, obj, s("notes"), s("put"), s("k"), s("v"))
	require.NoError(t, err)
	require.Equal(t, "notes", store)
	require.Equal(t, WritePut, k)
	_, k, err = ValidateWrite("x", 0, obj, s("notes"), s("delete"), s("k"), undef)
	require.NoError(t, err)
	require.Equal(t, WriteDelete, k)
	_, _, err = ValidateWrite("x", 3, obj, s("notes"), s("upsert"), s("k"), s("v"))
	require.EqualError(t, err, `tabfence.x: writes[3].op must be "put", "add" or "delete"`, "the op list comes from WriteOps")
	for i, c := range [][6]Arg{
		{s("x"), s("notes"), s("put"), s("k"), s("v")},
		{obj, s("tf_fences"), s("put"), s("k"), s("v")},
		{obj, s("notes"), s("upsert"), s("k"), s("v")},
		{obj, s("notes"), s("put"), undef, s("v")},
		{obj, s("notes"), s("add"), s("k"), undef},
	} {
		_, _, err := ValidateWrite("x", 0, c[0], c[1], c[2], c[3], c[4])
		assert.Error(t, err, "case %d accepted", i)
	}
}

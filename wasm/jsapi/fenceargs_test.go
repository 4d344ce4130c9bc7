package jsapi

import (
	"strings"
	"testing"
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
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || o.Fenced != c.fenced || o.Database != DefaultDatabase || o.Version != 1 {
			t.Errorf("%s: %+v %v", c.name, o, err)
		}
	}
	o, err := ValidateStorage("x", StorageArgs{Stores: Arg{Kind: KindObject}, StoresArray: true,
		StoreItems: []Arg{str("a"), str("b"), str("a")}}, false)
	if err != nil || len(o.Stores) != 2 {
		t.Fatalf("stores %v %v", o.Stores, err)
	}
}

func TestValidateOp(t *testing.T) {
	num := func(f float64) Arg { return Arg{Kind: KindNumber, Num: f} }
	obj := Arg{Kind: KindObject}
	id := Arg{Kind: KindString, Str: "op-1"}
	if o, err := ValidateOp("x", OpArgs{Op: obj, Token: num(3), OperationID: id}, 0); err != nil || o.Token != 3 || o.Sequence != 0 {
		t.Fatalf("%+v %v", o, err)
	}
	if o, err := ValidateOp("x", OpArgs{Op: obj, OperationID: id, Seqnce: num(2)}, 7); err != nil || o.Token != 7 || o.Sequence != 2 {
		t.Fatalf("ctx default token: %+v %v", o, err)
	}
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
		if _, err := ValidateOp("x", a, 0); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	if _, err := ValidateOp("x", OpArgs{Op: obj, Token: num(6), OperationID: id}, 7); err == nil {
		t.Error("a leader context accepted another token")
	}
}

func TestValidateWrite(t *testing.T) {
	s := func(v string) Arg { return Arg{Kind: KindString, Str: v} }
	obj, undef := Arg{Kind: KindObject}, Arg{}
	if _, k, err := ValidateWrite("x", 0, obj, s("notes"), s("put"), s("k"), s("v")); err != nil || k != WritePut {
		t.Fatal(k, err)
	}
	if _, k, err := ValidateWrite("x", 0, obj, s("notes"), s("delete"), s("k"), undef); err != nil || k != WriteDelete {
		t.Fatal(k, err)
	}
	for i, c := range [][6]Arg{
		{s("x"), s("notes"), s("put"), s("k"), s("v")},
		{obj, s("tf_fences"), s("put"), s("k"), s("v")},
		{obj, s("notes"), s("upsert"), s("k"), s("v")},
		{obj, s("notes"), s("put"), undef, s("v")},
		{obj, s("notes"), s("add"), s("k"), undef},
	} {
		if _, _, err := ValidateWrite("x", 0, c[0], c[1], c[2], c[3], c[4]); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

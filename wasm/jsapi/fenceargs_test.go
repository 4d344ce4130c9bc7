package main

import (
	"strings"
	"testing"
)

func TestValidateStorageDefaults(t *testing.T) {
	str := func(s string) arg { return arg{Kind: kindString, Str: s} }
	cases := []struct {
		name    string
		a       storageArgs
		elect   bool
		fenced  bool
		wantErr string
	}{
		{"elect without resource is unfenced", storageArgs{}, true, false, ""},
		{"elect with resource is fenced", storageArgs{Resource: str("r")}, true, true, ""},
		{"fenced false wins", storageArgs{Resource: str("r"), Fenced: arg{Kind: kindBoolean}}, true, false, ""},
		{"fenced true without resource", storageArgs{Fenced: arg{Kind: kindBoolean, Num: 1}}, true, true, ""},
		{"fenced must be boolean", storageArgs{Fenced: str("yes")}, true, false, "fenced must be a boolean"},
		{"fence is always fenced", storageArgs{}, false, true, ""},
		{"stores must be an array", storageArgs{Stores: str("notes")}, false, true, "stores must be an array"},
		{"reserved store", storageArgs{Stores: arg{Kind: kindObject}, StoresArray: true, StoreItems: []arg{str("tf_x")}}, false, true, "reserved"},
		{"version integer", storageArgs{Version: arg{Kind: kindNumber, Num: 1.5}}, false, true, "version must be"},
	}
	for _, c := range cases {
		o, err := validateStorage("x", c.a, c.elect)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || o.Fenced != c.fenced || o.Database != defaultDatabase || o.Version != 1 {
			t.Errorf("%s: %+v %v", c.name, o, err)
		}
	}
	o, err := validateStorage("x", storageArgs{Stores: arg{Kind: kindObject}, StoresArray: true,
		StoreItems: []arg{str("a"), str("b"), str("a")}}, false)
	if err != nil || len(o.Stores) != 2 {
		t.Fatalf("stores %v %v", o.Stores, err)
	}
}

func TestValidateOp(t *testing.T) {
	num := func(f float64) arg { return arg{Kind: kindNumber, Num: f} }
	obj := arg{Kind: kindObject}
	id := arg{Kind: kindString, Str: "op-1"}
	if o, err := validateOp("x", opArgs{Op: obj, Token: num(3), OperationID: id}, 0); err != nil || o.Token != 3 || o.Sequence != 0 {
		t.Fatalf("%+v %v", o, err)
	}
	if o, err := validateOp("x", opArgs{Op: obj, OperationID: id, Seqnce: num(2)}, 7); err != nil || o.Token != 7 || o.Sequence != 2 {
		t.Fatalf("ctx default token: %+v %v", o, err)
	}
	bad := []opArgs{
		{Op: arg{Kind: kindNull}},
		{Op: obj, Token: num(0), OperationID: id},
		{Op: obj, Token: num(1 << 60), OperationID: id},
		{Op: obj, Token: num(1.5), OperationID: id},
		{Op: obj, Token: num(1), OperationID: arg{Kind: kindString}},
		{Op: obj, Token: num(1), OperationID: arg{Kind: kindString, Str: "a\nb"}},
		{Op: obj, Token: num(1), OperationID: id, Seqnce: num(0)},
	}
	for i, a := range bad {
		if _, err := validateOp("x", a, 0); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	if _, err := validateOp("x", opArgs{Op: obj, Token: num(6), OperationID: id}, 7); err == nil {
		t.Error("a leader context accepted another token")
	}
}

func TestValidateWrite(t *testing.T) {
	s := func(v string) arg { return arg{Kind: kindString, Str: v} }
	obj, undef := arg{Kind: kindObject}, arg{}
	if _, k, err := validateWrite("x", 0, obj, s("notes"), s("put"), s("k"), s("v")); err != nil || k != writePut {
		t.Fatal(k, err)
	}
	if _, k, err := validateWrite("x", 0, obj, s("notes"), s("delete"), s("k"), undef); err != nil || k != writeDelete {
		t.Fatal(k, err)
	}
	for i, c := range [][6]arg{
		{s("x"), s("notes"), s("put"), s("k"), s("v")},
		{obj, s("tf_fences"), s("put"), s("k"), s("v")},
		{obj, s("notes"), s("upsert"), s("k"), s("v")},
		{obj, s("notes"), s("put"), undef, s("v")},
		{obj, s("notes"), s("add"), s("k"), undef},
	} {
		if _, _, err := validateWrite("x", 0, c[0], c[1], c[2], c[3], c[4]); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

package main

import (
	"strconv"
)

// Argument validation of the fence and channel areas (fence_js.go,
// channel_js.go, the fenced options of elect), pure Go like args.go.

// maxTokenArg is the largest token, sequence or version JavaScript can name
// exactly (2^53-1).
const maxTokenArg = 1<<53 - 1

// maxWrites bounds the writes of one apply: one transaction, kept short.
const maxWrites = 1000

// maxStores bounds the stores option: a page declares a handful.
const maxStores = 256

// defaultDatabase is the IndexedDB database of the runtime unless an
// option names another.
const defaultDatabase = "tabfence"

func itoa(n int) string { return strconv.Itoa(n) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// storageArgs are the storage options shared by elect() and fence().
type storageArgs struct {
	Fenced   arg // elect only: boolean or absent
	Resource arg // elect only: whether a resource was given decides the default of fenced
	Database arg
	Version  arg
	// Stores: IsArray says whether the value was an array; Items its
	// elements (nil when absent).
	Stores      arg
	StoresArray bool
	StoreItems  []arg
}

// storageOptions are storageArgs once validated.
type storageOptions struct {
	Fenced   bool
	Database string
	Version  uint64
	Stores   []string
}

// validateStorage checks the storage options of elect() or fence().
// fenced defaults to true when a resource is given: naming a resource
// says the leader writes to something, and writes must carry a token.
func validateStorage(where string, a storageArgs, forElect bool) (storageOptions, error) {
	var o storageOptions
	if forElect {
		switch a.Fenced.Kind {
		case kindUndefined, kindNull:
			o.Fenced = !a.Resource.absent()
		case kindBoolean:
			o.Fenced = a.Fenced.Num != 0
		default:
			return o, typeErr(where, "fenced must be a boolean when given, got "+a.Fenced.Kind.String())
		}
	} else {
		o.Fenced = true
	}
	var err error
	if o.Database, err = optionalString(where, "database", a.Database); err != nil {
		return o, err
	}
	if o.Database == "" {
		o.Database = defaultDatabase
	}
	o.Version = 1
	if !a.Version.absent() {
		n := a.Version.Num
		if a.Version.Kind != kindNumber || n != n || n < 1 || n > maxTokenArg || n != float64(int64(n)) {
			return o, typeErr(where, "version must be an integer number >= 1 when given")
		}
		o.Version = uint64(n)
	}
	if a.Stores.absent() {
		return o, nil
	}
	if !a.StoresArray {
		return o, typeErr(where, "stores must be an array of store names when given, got "+a.Stores.Kind.String())
	}
	for i, s := range a.StoreItems {
		name, err := requiredString(where, "stores["+itoa(i)+"]", s)
		if err != nil {
			return o, err
		}
		if len(name) >= 3 && name[:3] == "tf_" {
			return o, typeErr(where, "store names starting with tf_ are reserved, got "+quote(name))
		}
		if !contains(o.Stores, name) {
			o.Stores = append(o.Stores, name)
		}
	}
	return o, nil
}

// intArg validates an integer in lo..2^53-1 (absent allowed when opt).
func intArg(where, field string, a arg, lo float64, opt bool) (uint64, error) {
	if opt && a.absent() {
		return 0, nil
	}
	n := a.Num
	if a.Kind != kindNumber || n != n || n < lo || n > maxTokenArg || n != float64(int64(n)) {
		return 0, typeErr(where, field+" must be an integer number from "+strconv.FormatFloat(lo, 'f', -1, 64)+" to 2^53-1")
	}
	return uint64(n), nil
}

// opArgs is the op of apply(): {token, operationID, sequence?}.
type opArgs struct {
	Op                         arg
	Token, OperationID, Seqnce arg
}

type opOptions struct {
	Token       uint64
	OperationID string
	Sequence    uint64
}

// validateOp checks apply()'s op. defaultToken (a leader context's own) is
// used when the token is left out; a different explicit token is refused.
func validateOp(where string, a opArgs, defaultToken uint64) (opOptions, error) {
	var o opOptions
	if a.Op.Kind != kindObject {
		return o, typeErr(where, "op must be an object {token, operationID, sequence?}, got "+a.Op.Kind.String())
	}
	var err error
	if defaultToken != 0 && a.Token.absent() {
		o.Token = defaultToken
	} else if o.Token, err = intArg(where, "op.token", a.Token, 1, false); err != nil {
		return o, err
	}
	if defaultToken != 0 && o.Token != defaultToken {
		return o, typeErr(where, "op.token "+strconv.FormatUint(o.Token, 10)+" is not this leader context's token "+strconv.FormatUint(defaultToken, 10))
	}
	if a.OperationID.Kind != kindString || a.OperationID.Str == "" || len(a.OperationID.Str) > 255 {
		return o, typeErr(where, "op.operationID must be a string of 1 to 255 bytes")
	}
	for i := 0; i < len(a.OperationID.Str); i++ {
		if c := a.OperationID.Str[i]; c < 0x20 || c == 0x7f {
			return o, typeErr(where, "op.operationID must not contain control characters")
		}
	}
	o.OperationID = a.OperationID.Str
	if o.Sequence, err = intArg(where, "op.sequence", a.Seqnce, 1, true); err != nil {
		return o, err
	}
	return o, nil
}

// writeKind is one declarative write's operation.
type writeKind int

const (
	writePut writeKind = iota + 1
	writeAdd
	writeDelete
)

// writeOps are the ops of a declarative write, in the order the TypeError
// lists them; the d.ts's Write.op lists the same (TestDTSMatchesGo).
var writeOps = [...]struct {
	name string
	kind writeKind
}{{"put", writePut}, {"add", writeAdd}, {"delete", writeDelete}}

// validateWrite checks one element of apply()'s writes array:
// {store, op: "put"|"add"|"delete", key, value?}. Keys are required: the
// stores fence() declares use out-of-line keys.
func validateWrite(where string, i int, item, store, op, key, value arg) (string, writeKind, error) {
	at := "writes[" + itoa(i) + "]"
	if item.Kind != kindObject {
		return "", 0, typeErr(where, at+" must be an object {store, op, key, value}, got "+item.Kind.String())
	}
	name, err := requiredString(where, at+".store", store)
	if err != nil {
		return "", 0, err
	}
	if len(name) >= 3 && name[:3] == "tf_" {
		return "", 0, typeErr(where, at+".store: tf_ stores are tabfence's own")
	}
	var k writeKind
	names := make([]string, len(writeOps))
	for i, w := range writeOps {
		names[i] = w.name
		if op.Kind == kindString && op.Str == w.name {
			k = w.kind
		}
	}
	if k == 0 {
		return "", 0, typeErr(where, at+".op must be "+orList(names, `"`))
	}
	if key.Kind == kindUndefined {
		return "", 0, typeErr(where, at+".key is required")
	}
	if k != writeDelete && value.Kind == kindUndefined {
		return "", 0, typeErr(where, at+".value is required for "+op.Str)
	}
	return name, k, nil
}

package jsapi

import (
	"slices"
	"strconv"
)

// Argument validation of the fence and channel areas (fence_js.go,
// channel_js.go, the fenced options of elect), pure Go like args.go.

// MaxTokenArg is the largest token, sequence or version JavaScript can name
// exactly (2^53-1).
const MaxTokenArg = 1<<53 - 1

// MaxWrites bounds the writes of one apply: one transaction, kept short.
const MaxWrites = 1000

// MaxStores bounds the stores option: a page declares a handful.
const MaxStores = 256

// DefaultDatabase is the IndexedDB database of the runtime unless an
// option names another.
const DefaultDatabase = "tabfence"

// StorageArgs are the storage options shared by elect() and fence().
type StorageArgs struct {
	Fenced   Arg // elect only: boolean or absent
	Resource Arg // elect only: whether a resource was given decides the default of fenced
	Database Arg
	Version  Arg
	// Stores: IsArray says whether the value was an array; Items its
	// elements (nil when absent).
	Stores      Arg
	StoresArray bool
	StoreItems  []Arg
}

// StorageOptions are storageArgs once validated.
type StorageOptions struct {
	Fenced   bool
	Database string
	Version  uint64
	Stores   []string
}

// ValidateStorage checks the storage options of elect() or fence().
// fenced defaults to true when a resource is given: naming a resource
// says the leader writes to something, and writes must carry a token.
func ValidateStorage(where string, a StorageArgs, forElect bool) (StorageOptions, error) {
	var o StorageOptions
	if forElect {
		switch a.Fenced.Kind {
		case KindUndefined, KindNull:
			o.Fenced = !a.Resource.Absent()
		case KindBoolean:
			o.Fenced = a.Fenced.Num != 0
		default:
			return o, TypeErr(where, "fenced must be a boolean when given, got "+a.Fenced.Kind.String())
		}
	} else {
		o.Fenced = true
	}
	var err error
	if o.Database, err = OptionalString(where, "database", a.Database); err != nil {
		return o, err
	}
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	o.Version = 1
	if !a.Version.Absent() {
		n := a.Version.Num
		if a.Version.Kind != KindNumber || n != n || n < 1 || n > MaxTokenArg || n != float64(int64(n)) {
			return o, TypeErr(where, "version must be an integer number >= 1 when given")
		}
		o.Version = uint64(n)
	}
	if a.Stores.Absent() {
		return o, nil
	}
	if !a.StoresArray {
		return o, TypeErr(where, "stores must be an array of store names when given, got "+a.Stores.Kind.String())
	}
	for i, s := range a.StoreItems {
		name, err := RequiredString(where, "stores["+strconv.Itoa(i)+"]", s)
		if err != nil {
			return o, err
		}
		if len(name) >= 3 && name[:3] == "tf_" {
			return o, TypeErr(where, "store names starting with tf_ are reserved, got "+Quote(name))
		}
		if !slices.Contains(o.Stores, name) {
			o.Stores = append(o.Stores, name)
		}
	}
	return o, nil
}

// IntArg validates an integer in lo..2^53-1 (absent allowed when opt).
func IntArg(where, Field string, a Arg, lo float64, opt bool) (uint64, error) {
	if opt && a.Absent() {
		return 0, nil
	}
	n := a.Num
	if a.Kind != KindNumber || n != n || n < lo || n > MaxTokenArg || n != float64(int64(n)) {
		return 0, TypeErr(where, Field+" must be an integer number from "+strconv.FormatFloat(lo, 'f', -1, 64)+" to 2^53-1")
	}
	return uint64(n), nil
}

// OpArgs is the op of apply(): {token, operationID, sequence?}.
type OpArgs struct {
	Op                         Arg
	Token, OperationID, Seqnce Arg
}

type OpOptions struct {
	Token       uint64
	OperationID string
	Sequence    uint64
}

// ValidateOp checks apply()'s op. defaultToken (a leader context's own) is
// used when the token is left out; a different explicit token is refused.
func ValidateOp(where string, a OpArgs, defaultToken uint64) (OpOptions, error) {
	var o OpOptions
	if a.Op.Kind != KindObject {
		return o, TypeErr(where, "op must be an object {token, operationID, sequence?}, got "+a.Op.Kind.String())
	}
	var err error
	if defaultToken != 0 && a.Token.Absent() {
		o.Token = defaultToken
	} else if o.Token, err = IntArg(where, "op.token", a.Token, 1, false); err != nil {
		return o, err
	}
	if defaultToken != 0 && o.Token != defaultToken {
		return o, TypeErr(where, "op.token "+strconv.FormatUint(o.Token, 10)+" is not this leader context's token "+strconv.FormatUint(defaultToken, 10))
	}
	if a.OperationID.Kind != KindString || a.OperationID.Str == "" || len(a.OperationID.Str) > 255 {
		return o, TypeErr(where, "op.operationID must be a string of 1 to 255 bytes")
	}
	for i := 0; i < len(a.OperationID.Str); i++ {
		if c := a.OperationID.Str[i]; c < 0x20 || c == 0x7f {
			return o, TypeErr(where, "op.operationID must not contain control characters")
		}
	}
	o.OperationID = a.OperationID.Str
	if o.Sequence, err = IntArg(where, "op.sequence", a.Seqnce, 1, true); err != nil {
		return o, err
	}
	return o, nil
}

// WriteKind is one declarative write's operation.
type WriteKind int

const (
	WritePut WriteKind = iota + 1
	WriteAdd
	WriteDelete
)

// WriteOps are the ops of a declarative write, in the order the TypeError
// lists them; the d.ts's Write.op lists the same (TestDTSMatchesGo).
var WriteOps = [...]struct {
	Name string
	Kind WriteKind
}{{"put", WritePut}, {"add", WriteAdd}, {"delete", WriteDelete}}

// ValidateWrite checks one element of apply()'s writes array:
// {store, op: "put"|"add"|"delete", key, value?}. Keys are required: the
// stores fence() declares use out-of-line keys.
func ValidateWrite(where string, i int, item, store, op, key, value Arg) (string, WriteKind, error) {
	At := "writes[" + strconv.Itoa(i) + "]"
	if item.Kind != KindObject {
		return "", 0, TypeErr(where, At+" must be an object {store, op, key, value}, got "+item.Kind.String())
	}
	name, err := RequiredString(where, At+".store", store)
	if err != nil {
		return "", 0, err
	}
	if len(name) >= 3 && name[:3] == "tf_" {
		return "", 0, TypeErr(where, At+".store: tf_ stores are tabfence's own")
	}
	var k WriteKind
	names := make([]string, len(WriteOps))
	for i, w := range WriteOps {
		names[i] = w.Name
		if op.Kind == KindString && op.Str == w.Name {
			k = w.Kind
		}
	}
	if k == 0 {
		return "", 0, TypeErr(where, At+".op must be "+OrList(names, `"`))
	}
	if key.Kind == KindUndefined {
		return "", 0, TypeErr(where, At+".key is required")
	}
	if k != WriteDelete && value.Kind == KindUndefined {
		return "", 0, TypeErr(where, At+".value is required for "+op.Str)
	}
	return name, k, nil
}

package idb

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rec(highest, seq uint64, ids ...string) FenceRecord {
	r := FenceRecord{Resource: "r", Highest: highest, HighestSeq: seq}
	for _, id := range ids {
		r.Recent = append(r.Recent, id)
	}
	return r
}

func op(token uint64, id string, seq uint64) Op {
	return Op{Resource: "r", Token: token, OperationID: id, Sequence: seq}
}

// TestDecideReferenceRows walks the reference's section 2 (42/41/42/43),
// section 16 ("Handling Same-Token Duplicates": highestToken,
// highestSequenceByToken, seenOperationIds) and section 22 (sequence within
// an epoch).
func TestDecideReferenceRows(t *testing.T) {
	cases := []struct {
		name    string
		rec     FenceRecord
		op      Op
		want    Result
		highest uint64
		seq     uint64
	}{
		// Section 2: accepted token = 42.
		{"s2 lower token 41 rejected", rec(42, 0, "a"), op(41, "b", 0), Stale, 42, 0},
		{"s2 same token 42 new op is not rejected globally", rec(42, 0, "a"), op(42, "b", 0), Accepted, 42, 0},
		{"s2 same token 42 same op is a duplicate", rec(42, 0, "a"), op(42, "a", 0), Duplicate, 42, 0},
		{"s2 higher token 43 accepted and advances", rec(42, 0, "a"), op(43, "b", 0), Accepted, 43, 0},
		// Section 16: a token is an epoch, not an operation ID.
		{"s16 many operations under one token", rec(7, 3, "o1", "o2", "o3"), op(7, "o4", 4), Accepted, 7, 4},
		{"s16 seenOperationIds: same op twice applied once", rec(7, 1, "same-op"), op(7, "same-op", 1), Duplicate, 7, 1},
		{"s16 highestSequenceByToken: replayed seq with new id", rec(7, 5), op(7, "late", 3), Duplicate, 7, 5},
		{"s16 highestSequenceByToken: equal seq", rec(7, 5), op(7, "x", 5), Duplicate, 7, 5},
		{"s16 seq gap is accepted (ordering is the sender's)", rec(7, 5), op(7, "x", 9), Accepted, 7, 9},
		{"s16 unsequenced op under same token only dedupes by id", rec(7, 5), op(7, "x", 0), Accepted, 7, 5},
		{"s16 highestToken: lower token even with known id is stale", rec(8, 0, "o1"), op(7, "o1", 0), Stale, 8, 0},
		{"s16 higher token resets sequence", rec(7, 50), op(8, "n", 1), Accepted, 8, 1},
		{"s16 higher token unsequenced resets sequence to 0", rec(7, 50), op(8, "n", 0), Accepted, 8, 0},
		{"s16 new leader retries op the old one applied", rec(7, 2, "o1"), op(8, "o1", 1), Duplicate, 7, 2},
		// Section 22: token=10 seq=1, seq=2, then seq=1 arrives late.
		{"s22 seq 1 first", rec(0, 0), op(10, "m1", 1), Accepted, 10, 1},
		{"s22 seq 2", rec(10, 1, "m1"), op(10, "m2", 2), Accepted, 10, 2},
		{"s22 late seq 1 duplicate", rec(10, 2, "m1", "m2"), op(10, "m1", 1), Duplicate, 10, 2},
		// Section 17: a fresh receiver accepts the first epoch; section 27 test 1.
		{"empty fence accepts token 1", FenceRecord{Resource: "r"}, op(1, "a", 0), Accepted, 1, 0},
		{"s27 older token cannot overwrite newer", rec(2, 0, "op-2"), op(1, "op-1", 0), Stale, 2, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.rec
			got, next := Decide(c.rec, 0, c.op, 0)
			require.Equal(t, c.want, got, "result")
			if got != Accepted {
				require.Equal(t, before.Highest, next.Highest, "a %v decision changed the record: %+v", got, next)
				require.Equal(t, before.HighestSeq, next.HighestSeq, "a %v decision changed the record: %+v", got, next)
				require.Len(t, next.Recent, len(before.Recent), "a %v decision changed the record: %+v", got, next)
				return
			}
			require.Equal(t, c.highest, next.Highest, "next record highest=%d seq=%d, want %d/%d", next.Highest, next.HighestSeq, c.highest, c.seq)
			require.Equal(t, c.seq, next.HighestSeq, "next record highest=%d seq=%d, want %d/%d", next.Highest, next.HighestSeq, c.highest, c.seq)
			require.Equal(t, c.op.OperationID, next.Recent[len(next.Recent)-1], "op not recorded: %+v", next.Recent)
			require.Equal(t, c.op.Resource, next.Resource, "resource")
		})
	}
}

func TestDecideBoundsRecent(t *testing.T) {
	r := FenceRecord{Resource: "r"}
	for i := 1; i <= 100; i++ {
		var res Result
		res, r = Decide(r, 0, op(1, "op"+strconv.Itoa(i), 0), 8)
		require.Equal(t, Accepted, res, "op %d", i)
		require.LessOrEqual(t, len(r.Recent), 8, "recent grew to %d", len(r.Recent))
	}
	require.Equal(t, "op93", r.Recent[0], "window %+v", r.Recent)
	require.Equal(t, "op100", r.Recent[7], "window %+v", r.Recent)
	res, _ := Decide(r, 0, op(1, "op100", 0), 8)
	require.Equal(t, Duplicate, res, "recent id not deduped")
	// The documented limit: an unsequenced id that left the window is new again.
	res, _ = Decide(r, 0, op(1, "op1", 0), 8)
	require.Equal(t, Accepted, res, "evicted id should be accepted (documented bound)")
	// With sequences, a replay is caught regardless of the window.
	s := FenceRecord{Resource: "r"}
	for i := uint64(1); i <= 100; i++ {
		_, s = Decide(s, 0, op(3, "s"+strconv.FormatUint(i, 10), i), 4)
	}
	res, _ = Decide(s, 0, op(3, "s1", 1), 4)
	require.Equal(t, Duplicate, res, "old sequence replay accepted")
	// Default limit.
	d := FenceRecord{Resource: "r"}
	for i := 0; i < 200; i++ {
		_, d = Decide(d, 0, op(1, "d"+strconv.Itoa(i), 0), 0)
	}
	require.Len(t, d.Recent, DefaultRecentOps, "default window")
}

func TestDecideDoesNotAliasInput(t *testing.T) {
	r := rec(1, 0, "a", "b")
	r.Recent = r.Recent[:2:2]
	_, n := Decide(r, 0, op(1, "c", 0), 2)
	require.Equal(t, "a", r.Recent[0], "in %+v out %+v", r.Recent, n.Recent)
	require.Equal(t, "b", r.Recent[1], "in %+v out %+v", r.Recent, n.Recent)
	require.Equal(t, "b", n.Recent[0], "in %+v out %+v", r.Recent, n.Recent)
	require.Equal(t, "c", n.Recent[1], "in %+v out %+v", r.Recent, n.Recent)
}

// TestDecideMonotonic checks the invariant over every ordering of a small
// set of ops: the highest accepted token never decreases, no op ID is
// accepted twice, and nothing below the highest is ever accepted.
func TestDecideMonotonic(t *testing.T) {
	ops := []Op{op(1, "a", 1), op(2, "b", 1), op(1, "c", 2), op(3, "a", 1), op(2, "d", 2), op(3, "e", 2), op(3, "e", 2), op(2, "b", 1)}
	var perm func(k int)
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	count := 0
	perm = func(k int) {
		if k == len(idx) {
			count++
			r := FenceRecord{Resource: "r"}
			applied := map[string]bool{}
			for _, i := range idx {
				o := ops[i]
				res, n := Decide(r, 0, o, 0)
				if res == Accepted {
					require.GreaterOrEqual(t, o.Token, r.Highest, "accepted token %d below %d", o.Token, r.Highest)
					require.False(t, applied[o.OperationID], "op %s applied twice", o.OperationID)
					applied[o.OperationID] = true
					r = n
				}
			}
			return
		}
		for i := k; i < len(idx); i++ {
			idx[k], idx[i] = idx[i], idx[k]
			perm(k + 1)
			idx[k], idx[i] = idx[i], idx[k]
		}
	}
	perm(0)
	require.Equal(t, 40320, count)
}

func TestOpValidate(t *testing.T) {
	long := string(make([]byte, 300))
	bad := []Op{
		{Token: 1, OperationID: "a"},
		{Resource: "r", Token: 1},
		{Resource: "r", OperationID: "a"},
		{Resource: "r", Token: MaxToken + 1, OperationID: "a"},
		{Resource: long, Token: 1, OperationID: "a"},
		{Resource: "r", Token: 1, OperationID: long},
		{Resource: "r", Token: 1, OperationID: "a", Sequence: MaxToken + 1},
		{Resource: "r", Token: 1, OperationID: "a\nb"},
		{Resource: "r", Token: 1, OperationID: "a\x00"},
	}
	for i, o := range bad {
		assert.ErrorIs(t, o.Validate(), ErrInvalidOp, "%d", i)
	}
	assert.NoError(t, op(MaxToken, "a", MaxToken).Validate())
	// The messages spell the limits out (no strconv at run time): they must
	// say what the constants say.
	for o, want := range map[Op]string{
		{Resource: long, Token: 1, OperationID: "a"}:                        "idb: invalid operation\nresource must be 1.." + strconv.Itoa(MaxResourceLen) + " bytes",
		{Resource: "r", Token: 1, OperationID: long}:                        "idb: invalid operation\noperation ID must be 1.." + strconv.Itoa(MaxOperationIDLen) + " bytes without control characters",
		{Resource: "r", OperationID: "a"}:                                   "idb: invalid operation\ntoken must be in 1..2^53-1",
		{Resource: "r", Token: 1, OperationID: "a", Sequence: MaxToken + 1}: "idb: invalid operation\nsequence must be <= 2^53-1",
	} {
		if err := o.Validate(); err == nil || err.Error() != want {
			t.Errorf("Validate(%+v) = %v, want %q", o, err, want)
		}
	}
}

func TestDecideCAS(t *testing.T) {
	cases := []struct {
		highest, token uint64
		want           bool
	}{{0, 1, true}, {5, 4, false}, {5, 5, true}, {5, 6, true}, {0, 0, false}, {0, MaxToken + 1, false}, {MaxToken, MaxToken, true}}
	for _, c := range cases {
		assert.Equal(t, c.want, DecideCAS(c.highest, 0, c.token), "DecideCAS(%d,%d)", c.highest, c.token)
	}
}

// A steal deposes the old owner the moment the thief's token is allocated,
// before the thief writes anything: a token below the allocated epoch is
// stale although the fence itself has not moved. A token above it (a
// server-issued one) is not refused by the allocation record.
func TestDecideAllocatedEpochDeposes(t *testing.T) {
	cases := []struct {
		name      string
		rec       FenceRecord
		allocated uint64
		op        Op
		want      Result
	}{
		{"old leader after a steal, before the thief writes", rec(3, 2, "a"), 4, op(3, "b", 3), Stale},
		{"old leader's retry of an applied op is stale, not duplicate", rec(3, 2, "a"), 4, op(3, "a", 1), Stale},
		{"fresh fence, token below allocated", FenceRecord{Resource: "r"}, 9, op(8, "x", 0), Stale},
		{"the thief's own token", rec(3, 2, "a"), 4, op(4, "t", 1), Accepted},
		{"the thief retries what the old leader applied", rec(3, 2, "a"), 4, op(4, "a", 1), Duplicate},
		{"a token above the allocated epoch (server-issued)", rec(3, 0), 4, op(100, "s", 0), Accepted},
		{"above the allocated epoch but below the fence", rec(100, 0), 4, op(50, "s", 0), Stale},
		{"no allocation record", rec(3, 0), 0, op(3, "n", 0), Accepted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, next := Decide(c.rec, c.allocated, c.op, 0)
			require.Equal(t, c.want, got, "result")
			if got != Accepted && next.Highest != c.rec.Highest {
				t.Fatalf("a %v decision moved the fence to %d", got, next.Highest)
			}
			if got == Accepted && next.Highest != c.op.Token {
				t.Fatalf("accepted, highest %d", next.Highest)
			}
		})
	}
	for _, c := range []struct {
		highest, allocated, token uint64
		want                      bool
	}{{0, 4, 3, false}, {0, 4, 4, true}, {0, 4, 5, true}, {5, 4, 4, false}, {0, 0, 1, true}} {
		assert.Equal(t, c.want, DecideCAS(c.highest, c.allocated, c.token), "DecideCAS(%d,%d,%d)", c.highest, c.allocated, c.token)
	}
}

func TestNextToken(t *testing.T) {
	n, err := NextToken(0)
	require.Equal(t, uint64(1), n)
	require.NoError(t, err)
	n, err = NextToken(MaxToken - 1)
	require.Equal(t, uint64(MaxToken), n)
	require.NoError(t, err)
	_, err = NextToken(MaxToken)
	require.ErrorIs(t, err, ErrTokenExhausted)
}

func TestSchema(t *testing.T) {
	require.Equal(t, uint64(1), (Schema{}).Version())
	s := Schema{Steps: []Step{{Version: 1}, {Version: 2}, {Version: 5}}}
	require.NoError(t, s.Validate())
	require.Equal(t, uint64(5), s.Version())
	require.Len(t, s.stepsBetween(0, 5), 3)
	got := s.stepsBetween(1, 5)
	require.Len(t, got, 2)
	require.Equal(t, uint64(2), got[0].Version)
	require.Empty(t, s.stepsBetween(5, 5))
	for _, bad := range []Schema{
		{Steps: []Step{{Version: 0}}},
		{Steps: []Step{{Version: 2}, {Version: 2}}},
		{Steps: []Step{{Version: 3}, {Version: 1}}},
		{Steps: []Step{{Version: MaxToken + 1}}},
	} {
		assert.ErrorIs(t, bad.Validate(), ErrInvalidSchema, "%+v", bad)
	}
}

func TestVersionChangeTellsDeleteFromUpgrade(t *testing.T) {
	require.Equal(t, Deleted, classifyVersionChange(nil), "null newVersion must be a delete")
	v := uint64(3)
	require.Equal(t, Upgraded, classifyVersionChange(&v), "a target version is an upgrade")
	require.ErrorIs(t, Deleted.closeErr(), ErrDeleted, "close errors")
	require.ErrorIs(t, Upgraded.closeErr(), ErrUpgraded, "close errors")
	require.ErrorIs(t, ClosedByBrowser.closeErr(), ErrClosed, "close errors")
	for k, s := range map[EventKind]string{Blocked: "blocked", Deleted: "deleted", Upgraded: "upgraded", ClosedByBrowser: "closed", 0: "unknown"} {
		assert.Equal(t, s, k.String(), "%d", k)
	}
}

func TestCorruptErrorIs(t *testing.T) {
	var err error = &CorruptError{Store: StoreFences, Key: "r", Reason: "highest: not a number"}
	require.ErrorIs(t, err, ErrCorruptRecord)
	require.NotErrorIs(t, err, ErrInvalidOp)
	require.NotEqual(t, "", err.Error(), "empty message")
}

func TestResultString(t *testing.T) {
	require.Equal(t, "accepted", Accepted.String())
	require.Equal(t, "duplicate", Duplicate.String())
	require.Equal(t, "stale", Stale.String())
	require.Equal(t, "invalid", Result(0).String())
}

func TestReservedNames(t *testing.T) {
	require.True(t, reserved(StoreEpochs))
	require.True(t, reserved(StoreFences))
	require.False(t, reserved("todos"))
	require.False(t, reserved("tf"))
}

func TestDecideCapsWindow(t *testing.T) {
	r := FenceRecord{Resource: "r"}
	for i := 0; i < MaxRecentOps+10; i++ {
		_, r = Decide(r, 0, op(1, "x"+strconv.Itoa(i), 0), 1<<30)
	}
	require.Len(t, r.Recent, MaxRecentOps)
	require.LessOrEqual(t, MaxRecentOps*(MaxOperationIDLen+1), maxRecentLen, "a full window would read back as corrupt")
}

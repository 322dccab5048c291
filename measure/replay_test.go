package measure

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// TestReplayRoundTrip: a replay record reads back as stored, in another
// process too, and an entry with none is ErrNoReplay.
func TestReplayRoundTrip(t *testing.T) {
	onBackends(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 0), open(t, 0)
		want := Replay{LedgerSeq: 7, Table: "visits", User: "alice", Texts: []string{"SELECT COUNT(*) FROM visits", "select age, count(*) from visits group by age"},
			Options: map[string]string{"dp_epsilon": "0.5"}, Reused: true, Stored: []int64{3, 4, 9}}
		if err := a.PutReplay(ctx, want); err != nil {
			t.Fatal(err)
		}
		if err := a.PutReplay(ctx, want); err == nil {
			t.Error("a second record for entry 7 was accepted")
		}
		got, err := b.Replay(ctx, 7)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("read %+v, stored %+v", got, want)
		}
		if _, err := b.Replay(ctx, 8); !errors.Is(err, ErrNoReplay) {
			t.Errorf("entry 8: err %v, want ErrNoReplay", err)
		}
	})
}

// TestByID: the measurements of a replay's basis read back by ID, in ID
// order, from another Store too; the IDs no longer stored are listed.
func TestByID(t *testing.T) {
	onBackends(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		a, b := open(t, 0), open(t, 0)
		ms := []*Measurement{sample("v", 2), sample("v", 3), sample("w", 1)}
		if err := a.Put(ctx, ms); err != nil {
			t.Fatal(err)
		}
		gone := ms[2].ID + 1000
		found, missing, err := b.ByID(ctx, []int64{ms[2].ID, gone, ms[0].ID, ms[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 2 || found[0].ID != ms[0].ID || found[1].ID != ms[2].ID || found[1].Version != "w" || !reflect.DeepEqual(found[0].Answers, ms[0].Answers) {
			t.Errorf("found %+v, want measurements %d and %d as stored", found, ms[0].ID, ms[2].ID)
		}
		if !reflect.DeepEqual(missing, []int64{gone}) {
			t.Errorf("missing %v, want [%d]", missing, gone)
		}
	})
}

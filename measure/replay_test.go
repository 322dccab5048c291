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
			Options: map[string]string{"dp_epsilon": "0.5"}, Reused: true}
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

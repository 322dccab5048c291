package budget

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildLedger writes six entries, closes the ledger and returns the entries.
//
//	1 charge alice adult 0.1      4 reuse  alice adult
//	2 charge bob   adult 0.2      5 charge alice adult,census 0.1
//	3 charge alice census 0.3     6 charge bob   census 0.25
func buildLedger(t *testing.T, path string) []Entry {
	t.Helper()
	ctx := context.Background()
	l, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, c := range []Charge{
		lapCharge("alice", 0.1, "adult"),
		lapCharge("bob", 0.2, "adult"),
		lapCharge("alice", 0.3, "census"),
		{},
		lapCharge("alice", 0.1, "adult", "census"),
		lapCharge("bob", 0.25, "census"),
	} {
		if i == 3 {
			_, err = l.Record(ctx, KindReuse, lapCharge("alice", 0, "adult"))
		} else {
			_, err = l.Charge(ctx, c, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, l)
	es, err := l.Entries(ctx, Filter{})
	if err != nil || len(es) != 6 {
		t.Fatalf("Entries = %d, %v", len(es), err)
	}
	return es
}

// rawExec edits the ledger file behind the package's back.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// forge inserts e as stored by appendEntry, with a valid hash over its fields.
func forge(t *testing.T, path string, e Entry) {
	t.Helper()
	ts := e.Time.UTC().Format(timeLayout)
	e.Hash = hashEntry(&e, ts)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := `["` + strings.Join(e.Tables, `","`) + `"]`
	unit, err := encodeUnit(e.Unit)
	if err != nil {
		t.Fatal(err)
	}
	spaces := ""
	if len(e.Spaces) > 0 {
		spaces = `["` + strings.Join(e.Spaces, `","`) + `"]`
	}
	if _, err := db.Exec(`INSERT INTO entries (`+entryColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		e.Seq, ts, e.Kind, e.User, e.ConnID, tables, e.Mechanism, e.Strategy,
		e.Cost.Epsilon, e.Cost.Rho, e.QueryDigest, e.PrevHash, e.Hash, unit, e.Cost.Delta, spaces); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name    string
		tamper  func(t *testing.T, path string, es []Entry)
		seq     int64
		because string
	}{
		{"(a) edit a cost", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE entries SET epsilon = 0.01 WHERE seq = 3")
		}, 3, "hash does not match"},
		{"(a) edit a cost and the aggregate to match", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE entries SET epsilon = 0.01 WHERE seq = 3",
				"UPDATE spent SET epsilon = epsilon - 0.29 WHERE user_name = 'alice' AND table_name IN ('census', '')",
				"UPDATE spent SET epsilon = epsilon - 0.29 WHERE user_name = '' AND table_name = 'census'")
		}, 3, "hash does not match"},
		{"(a) edit a user", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE entries SET user_name = 'mallory' WHERE seq = 2")
		}, 2, "hash does not match"},
		{"(a) edit a time", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE entries SET time = '2001-01-01T00:00:00.000000000Z' WHERE seq = 5")
		}, 5, "hash does not match"},
		{"(a) edit the tables", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, `UPDATE entries SET tables_json = '["adult"]' WHERE seq = 5`)
		}, 5, "hash does not match"},
		{"(a) garble the tables", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, `UPDATE entries SET tables_json = 'adult' WHERE seq = 4`)
		}, 4, "undecodable"},
		{"(b) delete a middle entry", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "DELETE FROM entries WHERE seq = 3")
		}, 3, "entry 3 is missing"},
		{"(b) delete the first entry", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "DELETE FROM entries WHERE seq = 1")
		}, 1, "entry 1 is missing"},
		{"(c) swap two entries", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE entries SET seq = -1 WHERE seq = 2",
				"UPDATE entries SET seq = 2 WHERE seq = 4",
				"UPDATE entries SET seq = 4 WHERE seq = -1")
		}, 2, "prev_hash"},
		{"(d) delete the last entry (truncation)", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "DELETE FROM entries WHERE seq = 6")
		}, 6, "truncated"},
		{"(d) truncate to half", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "DELETE FROM entries WHERE seq > 3")
		}, 4, "truncated"},
		{"(d) truncate everything", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "DELETE FROM entries")
		}, 1, "truncated"},
		{"(e) append a forged entry with a valid hash", func(t *testing.T, p string, es []Entry) {
			f := es[5]
			f.Seq, f.PrevHash, f.User, f.Time = 7, es[5].Hash, "mallory", es[5].Time.Add(time.Second)
			forge(t, p, f)
		}, 7, "beyond the head"},
		{"(e) append a forged entry with a made-up hash", func(t *testing.T, p string, es []Entry) {
			rawExec(t, p, `INSERT INTO entries SELECT 7, time, kind, user_name, conn_id, tables_json, mechanism,
				strategy, epsilon, rho, query_digest, hash, 'ab', unit_json, delta, spaces_json FROM entries WHERE seq = 6`)
		}, 7, "hash does not match"},
		{"(e) insert a forged entry in the middle", func(t *testing.T, p string, es []Entry) {
			rawExec(t, p, "UPDATE entries SET seq = seq + 100 WHERE seq >= 4",
				"UPDATE entries SET seq = seq - 99 WHERE seq >= 100",
				`INSERT INTO entries SELECT 4, time, kind, user_name, conn_id, tables_json, mechanism,
				strategy, epsilon, rho, query_digest, hash, hash, unit_json, delta, spaces_json FROM entries WHERE seq = 3`)
		}, 4, "hash does not match"},
		{"(e) insert a forged entry in the middle with a valid hash", func(t *testing.T, p string, es []Entry) {
			rawExec(t, p, "UPDATE entries SET seq = seq + 100 WHERE seq >= 4",
				"UPDATE entries SET seq = seq - 99 WHERE seq >= 100",
				"UPDATE head SET seq = 7")
			f := es[2]
			f.Seq, f.PrevHash = 4, es[2].Hash
			forge(t, p, f)
		}, 5, "prev_hash"}, // the forged 4 is self-consistent; the link to it breaks
		{"rewrite the last entry consistently, with a privacy unit its ε does not cover", func(t *testing.T, p string, es []Entry) {
			f := es[5]
			f.Unit = &UnitBound{Column: "user_id", MaxRows: 5, RowEpsilon: f.Cost.Epsilon}
			rawExec(t, p, "DELETE FROM entries WHERE seq = 6")
			forge(t, p, f)
			rawExec(t, p, "UPDATE head SET hash = (SELECT hash FROM entries WHERE seq = 6)")
		}, 6, "does not cover"},
		{"rewrite the last entry consistently, with a negative cost", func(t *testing.T, p string, es []Entry) {
			f := es[5]
			f.Cost.Epsilon = -5
			rawExec(t, p, "DELETE FROM entries WHERE seq = 6")
			forge(t, p, f)
			rawExec(t, p, "UPDATE head SET hash = (SELECT hash FROM entries WHERE seq = 6)")
		}, 6, "non-negative"},
		{"lower the spent aggregate", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE spent SET epsilon = 0 WHERE user_name = 'alice' AND table_name = 'adult'")
		}, 0, "spent aggregate"},
		{"delete a spent row", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "DELETE FROM spent WHERE user_name = 'bob' AND table_name = ''")
		}, 0, "no row"},
		{"add a spent row", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "INSERT INTO spent VALUES ('carol', 'adult', 0, 0, 0)")
		}, 0, "no entry explains"},
		{"move the head back", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE head SET seq = 5")
		}, 6, "beyond the head"},
		{"change the head hash", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "UPDATE head SET hash = (SELECT hash FROM entries WHERE seq = 5)")
		}, 6, "head hash"},
		{"delete the head", func(t *testing.T, p string, _ []Entry) {
			rawExec(t, p, "DELETE FROM head")
		}, 0, "head row is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "ledger.sqlite")
			es := buildLedger(t, path)
			tc.tamper(t, path, es)
			l, err := Open(ctx, path)
			if err != nil {
				t.Fatalf("Open after tampering: %v", err)
			}
			defer l.Close()
			err = l.Verify(ctx)
			var te *TamperError
			if !errors.As(err, &te) {
				t.Fatalf("Verify = %v, want *TamperError", err)
			}
			if te.Seq != tc.seq || !strings.Contains(te.Reason, tc.because) {
				t.Fatalf("Verify = %v (seq %d), want seq %d because %q", err, te.Seq, tc.seq, tc.because)
			}
			if _, _, err := l.SignHead(ctx, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))); !errors.As(err, &te) {
				t.Fatalf("SignHead on a tampered ledger = %v", err)
			}
		})
	}
}

// A ledger rewritten consistently (tail deleted, head and aggregate fixed)
// passes Verify, as documented; a head signed before exposes it.
func TestSignedHeadExposesConsistentRewrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	es := buildLedger(t, path)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	head, sig, err := l.SignHead(ctx, priv)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	seq, hash, err := ParseHead(head)
	if err != nil || seq != 6 || hash != es[5].Hash {
		t.Fatalf("ParseHead(%q) = %d, %s, %v", head, seq, hash, err)
	}

	rawExec(t, path, "DELETE FROM entries WHERE seq = 6",
		"UPDATE head SET seq = 5, hash = (SELECT hash FROM entries WHERE seq = 5)")
	l, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rows, err := l.Budgets(ctx) // what the aggregate must say now
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM spent; DELETE FROM spent_spaces"); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		q, name := "INSERT INTO spent VALUES (?, ?, ?, ?, ?)", r.Table
		if r.Space != "" {
			q, name = "INSERT INTO spent_spaces VALUES (?, ?, ?, ?, ?)", r.Space
		}
		if _, err := db.Exec(q, r.User, name, r.Cost.Epsilon, r.Cost.Rho, r.Cost.Delta); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("a consistent rewrite is documented to pass Verify, got %v", err)
	}
	if !VerifyHeadSignature(pub, head, sig) {
		t.Fatal("the old signed head no longer verifies")
	}
	now, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(now)) >= seq && now[seq-1].Hash == hash {
		t.Fatal("the rewritten ledger still holds the signed head")
	}
}

func TestSignHead(t *testing.T) { forBackends(t, testSignHead) }

func testSignHead(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	head, sig, err := l.SignHead(ctx, priv)
	if err != nil {
		t.Fatal(err)
	}
	if head != "dpproxy-ledger-head/v1 seq=0 hash="+genesisHash {
		t.Fatalf("empty ledger head = %q", head)
	}
	if !VerifyHeadSignature(pub, head, sig) {
		t.Fatal("signature of the empty head does not verify")
	}
	e, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), nil)
	if err != nil {
		t.Fatal(err)
	}
	head2, sig2, err := l.SignHead(ctx, priv)
	if err != nil {
		t.Fatal(err)
	}
	if seq, hash, err := ParseHead(head2); err != nil || seq != 1 || hash != e.Hash {
		t.Fatalf("ParseHead(%q) = %d, %s, %v", head2, seq, hash, err)
	}
	otherPub, _, _ := ed25519.GenerateKey(nil)
	forged := strings.Replace(head2, "seq=1", "seq=2", 1)
	tests := []struct {
		name string
		pub  ed25519.PublicKey
		head string
		sig  []byte
		want bool
	}{
		{"good", pub, head2, sig2, true},
		{"old head, old signature", pub, head, sig, true},
		{"signature of another head", pub, head2, sig, false},
		{"edited head", pub, forged, sig2, false},
		{"other key", otherPub, head2, sig2, false},
		{"short key", pub[:10], head2, sig2, false},
		{"no signature", pub, head2, nil, false},
		{"signed, but not a head", pub, "hello", ed25519.Sign(priv, []byte("hello")), false},
	}
	for _, tc := range tests {
		if got := VerifyHeadSignature(tc.pub, tc.head, tc.sig); got != tc.want {
			t.Errorf("%s: VerifyHeadSignature = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, _, err := l.SignHead(ctx, priv[:5]); err == nil {
		t.Fatal("SignHead with a short key: no error")
	}
}

func TestParseHead(t *testing.T) {
	good := "dpproxy-ledger-head/v1 seq=12 hash=" + strings.Repeat("ab", 32)
	if seq, hash, err := ParseHead(good); err != nil || seq != 12 || hash != strings.Repeat("ab", 32) {
		t.Fatalf("ParseHead(good) = %d, %s, %v", seq, hash, err)
	}
	for _, bad := range []string{
		"",
		"dpproxy-ledger-head/v2 seq=12 hash=" + strings.Repeat("ab", 32),
		"dpproxy-ledger-head/v1 seq=12",
		"dpproxy-ledger-head/v1 seq=-1 hash=" + strings.Repeat("ab", 32),
		"dpproxy-ledger-head/v1 seq=012 hash=" + strings.Repeat("ab", 32),
		"dpproxy-ledger-head/v1 seq=x hash=" + strings.Repeat("ab", 32),
		"dpproxy-ledger-head/v1 seq=12 hash=" + strings.Repeat("AB", 32),
		"dpproxy-ledger-head/v1 seq=12 hash=" + strings.Repeat("ab", 31),
		"dpproxy-ledger-head/v1 seq=12 hash=" + strings.Repeat("ab", 32) + " x",
		"dpproxy-ledger-head/v1 n=12 hash=" + strings.Repeat("ab", 32),
	} {
		if _, _, err := ParseHead(bad); err == nil {
			t.Errorf("ParseHead(%q): no error", bad)
		}
	}
}

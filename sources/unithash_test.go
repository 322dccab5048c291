package sources

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestPostgresUnitHashMatchesServer checks the Go replay of PostgreSQL's
// keyed hash against the server itself: the dialect's expression over
// NULLs, integers and text of every length around lookup3's 12-byte
// blocks, ASCII and multi-byte.
func TestPostgresUnitHashMatchesServer(t *testing.T) {
	srv := pgServer.Get(t)
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	expr := postgres{}.keyedHash("$1", []string{"$2::bigint", "$3::text"})
	key := "00112233445566778899aabbccddeeff"
	var texts []any
	for n := 0; n <= 40; n++ {
		texts = append(texts, strings.Repeat("abcdefghij", 5)[:n], strings.Repeat("é€", n))
	}
	texts = append(texts, nil)
	for _, unit := range []any{nil, int64(0), int64(-7), int64(1234567890123)} {
		for _, text := range texts {
			var got int64
			if err := db.QueryRowContext(context.Background(), "SELECT "+expr, key, unit, text).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := PostgresUnitHash(key, unit, text); got != want {
				t.Errorf("unit %v, text %q: server %d, Go %d", unit, text, got, want)
			}
		}
	}
	// A quoted literal, int4 and float8 values, as the cell hash and
	// other tables' columns have them.
	expr = postgres{}.keyedHash("$1", []string{"'cell'", "$2::integer", "$3::float8"})
	for _, n := range []any{nil, int64(0), int64(-1), int64(2147483647), int64(-2147483648)} {
		for _, f := range []any{nil, 0.0, math.Copysign(0, -1), 1.5, -1e300, math.NaN(), math.Inf(1)} {
			var got int64
			if err := db.QueryRowContext(context.Background(), "SELECT "+expr, key, n, f).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := PostgresUnitHash(key, "cell", n, f); got != want {
				t.Errorf("int4 %v, float8 %v: server %d, Go %d", n, f, got, want)
			}
		}
	}
	// The seeded form too (unused by the dialect, but the same code).
	var got int64
	if err := db.QueryRowContext(context.Background(), "SELECT hashtextextended($1, 12345678901234)", "seeded text").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := int64(pgHashBytesExtended([]byte("seeded text"), 12345678901234)); got != want {
		t.Errorf("seeded: server %d, Go %d", got, want)
	}
}

package sources

import (
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// An older PostgreSQL (no hash_record_extended) serves tables without a
// privacy unit and refuses, with why, to bound one with a unit.
func TestBoundableNeedsTheHash(t *testing.T) {
	old := errors.New("privacy units on PostgreSQL need version 14 or later")
	plain, units := &catalog.Table{Name: "t"}, &catalog.Table{Name: "u", Unit: &catalog.PrivacyUnit{Column: "user_id", MaxRows: 5}}
	for _, tc := range []struct {
		s     *server
		table *catalog.Table
		want  string
	}{
		{&server{}, units, ""},
		{&server{unitsErr: old}, plain, ""},
		{&server{unitsErr: old}, units, "table u: privacy units on PostgreSQL need version 14"},
	} {
		err := tc.s.boundable(tc.table)
		if (err == nil) != (tc.want == "") || err != nil && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s, server error %v: %v, want %q", tc.table.Name, tc.s.unitsErr, err, tc.want)
		}
	}
}

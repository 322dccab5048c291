// Package unitjoin names a join of protected tables on their privacy unit
// ("events JOIN users ON users.user_id = events.user_id"). The parser gives
// that name to the table a joined query reads (parser.Query.Table), and the
// catalog to the table it builds for the join (catalog.JoinTables): the
// two must agree, so the name is written here once, in a package both can
// import (neither imports the other, nor should: the catalog knows no SQL,
// the parser no configuration).
package unitjoin

import (
	"fmt"
	"strings"
)

// Table is one protected table of a join on the unit.
type Table struct {
	Table string // lower-case
	Unit  string // its unit column, lower-case
	Left  bool   // LEFT JOIN; false for the first table (inner)
	// On is the index of the earlier table whose unit the ON clause
	// equates with this table's (0 for the first table).
	On int
}

// Name is the joined table's name: the tables in FROM order, each joined
// to the earlier one its ON names.
func Name(tables []Table) string {
	var b strings.Builder
	for i, t := range tables {
		if i == 0 {
			b.WriteString(t.Table)
			continue
		}
		kind := " JOIN "
		if t.Left {
			kind = " LEFT JOIN "
		}
		o := tables[t.On]
		fmt.Fprintf(&b, "%s%s ON %s.%s = %s.%s", kind, t.Table, t.Table, t.Unit, o.Table, o.Unit)
	}
	return b.String()
}

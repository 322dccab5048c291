package parser

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dolthub/vitess/go/vt/sqlparser"
	"github.com/dolthub/vitess/go/vt/vterrors"
)

// Protected reports whether a (schema, table) names a protected table; the
// parser needs it to tell DP statements from pass-through ones. schema is
// the database qualifier as written ("" when the name is unqualified); table
// is lower-cased. Implementations should compare schema case-insensitively.
type Protected func(schema, table string) bool

// Columns reports whether the protected table (lower-case, as in
// Query.Table) has a column of that name (lower-case).
type Columns func(table, column string) bool

// Parse splits sql into statements (a multi-statement request is cut at the
// semicolons outside quotes and comments) and parses each with the vitess
// MySQL grammar. Comments and white space around each statement are dropped,
// pieces holding only comments are skipped, and Statement.Text is the
// statement's own text. The request fails as a whole on the first statement
// that is refused; errors are *Error values with MySQL codes.
//
// # What is intercepted
//
// A statement that reads no protected table is KindPassthrough: SHOW, SET,
// USE, KILL, ROLLBACK, SELECT @@var, SELECT VERSION(), information_schema
// queries, and also metadata statements that name a protected table without
// reading it (SHOW COLUMNS FROM t, DESCRIBE t, SHOW CREATE TABLE t, LOCK
// TABLES t, ANALYZE TABLE t): the schema-only database answers them. Text
// that vitess cannot parse is KindPassthrough too, unless an identifier in
// it names a protected table, in which case it is a syntax error (1064)
// with MySQL's message shape.
//
// A SELECT (or EXPLAIN SELECT) over exactly one protected table is one of:
//
//   - KindEmpty: LIMIT 0, or a WHERE that folds to FALSE (WHERE 1 <> 1,
//     WHERE 1 = 0, WHERE FALSE). Nothing is released, so the select list is
//     taken leniently: `*` (or t.*) is one SelectItem{Column: "*", Alias:
//     "*"}; a column is an AggNone item; COUNT/SUM/AVG (and their error
//     bars) are the usual items; any other expression (TRUE AS `_`, 1,
//     MAX(age)) is an item with Column "" and Agg AggNone carrying only its
//     output name. Where/GroupBy/OrderBy are filled when they parse and are
//     informative only; unsupported WHERE/GROUP BY/ORDER BY/HAVING forms are
//     tolerated (a bad qualifier is still 1054). Caveat for the engine: in
//     MySQL an aggregate without GROUP BY under WHERE FALSE returns one row
//     (COUNT 0, SUM/AVG NULL), not zero rows; such a query is KindEmpty
//     with GroupBy empty and aggregate items, and costs nothing either way.
//   - KindAggregate: at least one aggregate — COUNT(*), COUNT(x), SUM(x),
//     AVG(x), VARIANCE/VAR_POP/VAR_SAMP/STD/STDDEV/STDDEV_POP/STDDEV_SAMP(x)
//     of a column or an expression x (SelectItem.Column or Arg), possibly
//     wrapped in DP_STDERR/DP_CI_LOW/DP_CI_HIGH — in the select list,
//     HAVING or ORDER BY (so `SELECT a FROM t GROUP BY a ORDER BY COUNT(*)
//     DESC LIMIT k` is the top-k form). Every plain column of the select
//     list must be in GROUP BY, and every expression of columns
//     (SelectItem.Key) must be a function of the GROUP BY keys. Numeric
//     functions of aggregates and constants (POWER(AVG(x), 2), COUNT(*) /
//     2, 3 AS three) are post-processing (SelectItem.Expr).
//   - KindDomainList: no aggregate anywhere, and GROUP BY (or SELECT
//     DISTINCT) over exactly the selected keys, columns or expressions of
//     them. The answer is the declared domain (or its image under the
//     keys), so WHERE and HAVING are refused unless WHERE is a constant
//     TRUE (honouring a real WHERE would make the list depend on the
//     data); ORDER BY must name selected keys.
//   - KindExplain: EXPLAIN (or DESCRIBE, any FORMAT) over a KindAggregate
//     select; Query is the inner select. EXPLAIN over a domain list or an
//     empty select, and EXPLAIN ANALYZE, are refused with 1235.
//
// # Names
//
// Identifiers are case-insensitive and lower-cased in the IR (Column,
// GroupBy, Table); Query.Schema keeps the qualifier as written. Columns may
// be qualified by the table name, its alias, or schema.table; any other
// qualifier is 1054 (Unknown column). Whether a column exists is checked
// when the caller passes Columns (ParseWithColumns); Parse leaves that to
// compile/. SelectItem.Alias is the alias
// as written, else the name MySQL gives the column: the column name as
// written without qualifier for a column, else the expression text exactly
// as the client wrote it (`COUNT( * )` stays "COUNT( * )"). Names resolve
// as in MySQL: in GROUP BY and HAVING a name is a column of the table
// first, then a select-list alias (`SELECT education AS sex ... GROUP BY
// sex` groups by the column sex); in ORDER BY an alias first. Positions
// (GROUP BY 1) name select items. An expression in GROUP BY becomes a
// GroupExpr (Query.GroupExprs, with its position among the keys); ORDER BY
// an aggregate, an expression or a key that is selected points at that
// item (SelectIndex), else it is SelectIndex -1 with Agg/Column/Arg, Expr
// or Key set.
//
// # Predicates
//
// WHERE becomes a Pred. The simple forms keep their own atoms: `column op
// literal` with op = <> != < <= > >= (`30 < age` is normalised to `age >
// 30`), [NOT] BETWEEN, [NOT] IN (list), IS [NOT] NULL. Anything else over
// columns is a general atom on expressions (Expr): comparisons and <=> of
// expressions, IN lists of expressions, BETWEEN of expressions, LIKE (with
// ESCAPE; MySQL's \% and \_ kept), REGEXP/RLIKE, IS [NOT] TRUE/FALSE, a
// bare expression as a condition; expressions are columns, literals, + - *
// / DIV %, CASE, IF, IFNULL, COALESCE, NULLIF, CAST and the deterministic
// functions of scalarFuncs. AND, OR, NOT, XOR (expanded) and parentheses
// combine them. Comparisons and tests between literals (1 <> 1, 1 = 1,
// TRUE, FALSE, 0, 1) fold to Const, and And/Or with constant terms are
// simplified, so `WHERE 1 = 1 AND sex = 'Male'` is the Compare alone and
// `WHERE 1 = 1` is Const{true}; a comparison with NULL stays an atom
// (UNKNOWN, also under NOT). Literals: numbers (with sign), quoted strings
// (Text unquoted, Quoted true), TRUE/FALSE (Text "1"/"0"), _charset'...'
// introducers. HAVING becomes AggCompare terms (`aggregate op number`,
// the aggregate written out, by its alias, or an expression of
// aggregates) and conditions on the group keys (aliases of key
// expressions replaced by the expressions), combined with And/Or/Not.
//
// # Refusals
//
// CodeDPRefused (3900) when the statement asks for something DP cannot
// release, whatever the syntax: rows or row values (SELECT *, plain column
// reads without GROUP BY, constants selected row by row, a column or
// expression that is not a GROUP BY key), single-row statistics (MIN, MAX,
// ANY_VALUE, GROUP_CONCAT, JSON_ARRAYAGG, JSON_OBJECTAGG, BIT_AND/OR/XOR),
// joins other than to public tables on a domain column (see ParseEnv),
// private columns, subqueries, derived tables, CTEs, UNION/INTERSECT/EXCEPT
// when a protected table is involved, SELECT ... INTO, a
// WHERE or HAVING on a domain list, HAVING on a column that is not a key,
// and every write (INSERT, UPDATE, DELETE, REPLACE, LOAD, DDL) on a
// protected table (read-only).
//
// Time: NOW(), CURRENT_TIMESTAMP, SYSDATE(), UTC_TIMESTAMP() (with or
// without fractional digits) are TIMESTAMP('<the request's time>'),
// CURDATE(), CURRENT_DATE, UTC_DATE() are DATE('<its day>') and
// UNIX_TIMESTAMP() its Unix seconds, one time per request (ParseAt), in
// UTC. x ± INTERVAL n unit, DATE_ADD, DATE_SUB, ADDDATE, SUBDATE and
// TIMESTAMPADD are Call{"date_add", x, ±n, 'unit'}; EXTRACT(unit FROM x)
// is Call{"extract", 'unit', x}; TIMESTAMPDIFF(unit, a, b) is
// Call{"timestampdiff", 'unit', a, b}; CAST(x AS DATE) is DATE(x) and
// CAST(x AS DATETIME) TIMESTAMP(x).
//
// CodeNotSupported (1235) when the request is a legitimate aggregate query
// but uses SQL outside dpproxy's subset: non-deterministic functions
// (RAND(), UUID(), ...), TIME values (CURTIME(), TIMEDIFF), functions
// outside the supported list, COLLATE, bit operators, placeholders, hex/bit literals,
// row constructors, nested aggregates, COUNT(DISTINCT c), GROUP BY a
// constant or an aggregate, LIMIT with a non-zero offset, window
// functions, EXPLAIN ANALYZE, PREPARE over a protected table.
//
// CodeBadField (1054) for a qualifier that names neither the table nor its
// alias, a column the table does not have (with Columns), or a position
// (GROUP BY 5) outside the select list, with MySQL's message. As in MySQL,
// names are resolved before anything else is judged, clause by clause in
// MySQL's order (select list, WHERE, GROUP BY, HAVING, ORDER BY), so
// `SELECT nosuch FROM t` is 1054 in 'field list', not a refusal to read
// rows. GROUP BY, HAVING and ORDER BY may also name select-list items
// (aliases, or the expression as written). CodeParseError (1064) for text that does not parse and names a
// protected table.
//
// Every message says what to write instead and depends only on the query
// text, never on the data.
func Parse(sql string, protected Protected) ([]Statement, error) {
	return ParseWithColumns(sql, protected, nil)
}

// ParseWithColumns is Parse that also checks every column a SELECT over a
// protected table names against columns: an unknown one is 1054 with
// MySQL's message (`Unknown column 'c' in 'field list'`), before any
// refusal. A nil columns checks qualifiers only, like Parse.
func ParseWithColumns(sql string, protected Protected, columns Columns) ([]Statement, error) {
	return ParseEnv(sql, Env{Protected: protected, Columns: columns})
}

// ParseAt is ParseWithColumns with the request's time: NOW(),
// CURRENT_TIMESTAMP, CURDATE() and their kind are that one time (UTC,
// truncated to the second) in every statement of sql, written into the IR
// as a constant (TIMESTAMP('2025-01-01 10:00:00'), DATE('2025-01-01')), so
// that a query's meaning, and whatever is cached under it, is fixed.
func ParseAt(sql string, protected Protected, columns Columns, now time.Time) ([]Statement, error) {
	return ParseEnv(sql, Env{Protected: protected, Columns: columns, Now: now})
}

// vitessParse parses one statement, turning a parser panic into an error.
func vitessParse(text string) (tree sqlparser.Statement, err error) {
	defer func() {
		if r := recover(); r != nil {
			tree, err = nil, fmt.Errorf("%w: %v", errParserPanic, r)
		}
	}()
	return sqlparser.Parse(text)
}

func parseOneEnv(p piece, env Env) (Statement, error) {
	if inner, analyze, ok := explainTarget(p); ok {
		// EXPLAIN [ANALYZE] [FORMAT=...] SELECT ...: the inner select is
		// parsed on its own, so that vitess (which rejects FORMAT=JSON and
		// loses the written select expressions under EXPLAIN) sees plain
		// SELECT text.
		st, err := parseOneEnv(inner, env)
		if err != nil {
			return Statement{}, err
		}
		switch {
		case st.Kind == KindPassthrough:
			return Statement{Kind: KindPassthrough, Text: p.text}, nil
		case analyze:
			return Statement{}, Errorf(CodeNotSupported, "EXPLAIN ANALYZE is not supported over protected tables: use EXPLAIN SELECT ... to see the plan, cost and expected error without spending budget, then run the query itself")
		case st.Kind != KindAggregate && st.Kind != KindPostProcess:
			return Statement{}, Errorf(CodeNotSupported, "EXPLAIN shows the DP plan of aggregate queries (COUNT/SUM/AVG); this statement is answered from the declared domain, or returns no rows, at no privacy cost")
		}
		return Statement{Kind: KindExplain, Text: p.text, Query: st.Query, Post: st.Post}, nil
	}
	tree, err := vitessParse(p.text)
	// MySQL's non-reserved keywords are identifiers where vitess would
	// take them for keywords (`SELECT u.plan ...`): quote them and retry.
	// The statement keeps its text as sent.
	// Each quote moves the error on (or away); a later error is reported
	// on the quoted text, where it is.
	sent := p.text
	for tries := 0; err != nil && tries < 8; tries++ {
		q, ok := quoteIdentifiers(p, err)
		if !ok {
			break
		}
		p = q
		tree, err = vitessParse(p.text)
	}
	if err != nil {
		if inner, ok := unwrapParens(p); ok {
			// vitess rejects a parenthesised top-level SELECT; MySQL does not.
			st, err2 := parseOneEnv(inner, env)
			if e, ok := err2.(*Error); err2 == nil || (ok && e.Code != CodeParseError) {
				st.Text = p.text
				return st, err2
			}
		}
		if q, ok := collapseParens(p); ok {
			// vitess rejects a doubly parenthesised derived table
			// (Power BI's FROM ((SELECT ...)) AS t0); MySQL does not.
			if st, err2 := parseOneEnv(q, env); err2 == nil {
				st.Text = p.text
				return st, nil
			}
		}
		if mentionsProtected(p.toks, env.Protected) {
			return Statement{}, syntaxError(p, err)
		}
		return Statement{Kind: KindPassthrough, Text: p.text}, nil
	}
	c := &classifier{text: p.text, protected: env.Protected, columns: env.Columns, private: env.Private, public: env.Public, units: env.Units, now: env.Now}
	c.withJoins()
	st, err := c.statement(tree)
	if err != nil {
		return Statement{}, err
	}
	st.Text = sent
	return st, nil
}

// subPiece is the part of p from its i-th token on (to the j-th token
// exclusive).
func subPiece(p piece, i, j int) piece {
	start, end := p.toks[i].start, p.toks[j-1].end
	q := piece{text: p.text[start:end]}
	for _, t := range p.toks[i:j] {
		t.start -= start
		t.end -= start
		q.toks = append(q.toks, t)
	}
	return q
}

func isWord(t token, words ...string) bool {
	if t.kind != tokWord {
		return false
	}
	for _, w := range words {
		if strings.EqualFold(t.text, w) {
			return true
		}
	}
	return false
}

// explainTarget recognises EXPLAIN / DESCRIBE / DESC [ANALYZE] [EXTENDED |
// PARTITIONS] [FORMAT = x] followed by a SELECT, and returns that SELECT.
func explainTarget(p piece) (inner piece, analyze, ok bool) {
	t := p.toks
	if len(t) < 2 || !isWord(t[0], "explain", "describe", "desc") {
		return piece{}, false, false
	}
	i := 1
	for i < len(t) {
		switch {
		case isWord(t[i], "analyze"):
			analyze = true
			i++
			continue
		case isWord(t[i], "extended", "partitions"):
			i++
			continue
		case isWord(t[i], "format") && i+2 < len(t) && t[i+1].text == "=":
			i += 3
			continue
		}
		break
	}
	if i >= len(t) || !(isWord(t[i], "select", "with", "table", "values") || (t[i].kind == tokPunct && t[i].text == "(")) {
		return piece{}, false, false
	}
	return subPiece(p, i, len(t)), analyze, true
}

// unwrapParens returns the statement inside `( ... )` when the parentheses
// enclose the whole piece.
func unwrapParens(p piece) (piece, bool) {
	t := p.toks
	if len(t) < 3 || t[0].text != "(" || t[len(t)-1].text != ")" || t[0].kind != tokPunct || t[len(t)-1].kind != tokPunct {
		return piece{}, false
	}
	depth := 0
	for i, x := range t {
		if x.kind != tokPunct {
			continue
		}
		switch x.text {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 && i != len(t)-1 {
				return piece{}, false
			}
		}
	}
	return subPiece(p, 1, len(t)-1), true
}

// syntaxError builds MySQL's ER_PARSE_ERROR for a statement vitess rejected:
// "... near '<rest of the statement from the offending token, 80 chars>' at
// line N"; near ” when the statement ended too early.
func syntaxError(p piece, err error) *Error {
	text := p.text
	pos := len(text) // offset just past the offending token; len(text) = end of input
	if errors.Is(err, errParserPanic) {
		pos = 0 // no position: quote the whole statement
	} else if se, ok := vterrors.AsSyntaxError(err); ok {
		pos = se.Position - 1
		if pos >= len(text) {
			// vitess reports the same position for an error on the last
			// token and at the end of input: parse again with a token that
			// can never continue a statement to tell the two apart.
			pos = len(text) + 1
			if _, err2 := vitessParse(text + " \x01"); err2 != nil {
				if se2, ok := vterrors.AsSyntaxError(err2); ok && se2.Position-1 <= len(text) {
					pos = se2.Position - 1
				}
			}
		}
	}
	near, start := "", len(text)
	if n := len(p.toks); n > 0 && p.toks[n-1].open && pos > p.toks[n-1].start {
		// An unterminated quote or comment: MySQL points at its start.
		pos = p.toks[n-1].start + 1
	}
	if pos <= len(text) {
		for _, t := range p.toks {
			if t.start < pos {
				start = t.start
			}
		}
		if start < len(text) {
			near = text[start:]
		}
	}
	if utf8.RuneCountInString(near) > 80 {
		near = string([]rune(near)[:80])
	}
	line := 1 + strings.Count(text[:start], "\n")
	return Errorf(CodeParseError, "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '%s' at line %d", near, line)
}

// classifier decides what one parsed statement is.
type classifier struct {
	text      string
	protected Protected
	columns   Columns        // nil: existence of columns is not checked
	private   PrivateColumns // nil: no private columns
	public    PublicTables   // nil: no public tables
	units     Units          // nil: no table declares a privacy unit
	now       time.Time      // the request's time, UTC, whole seconds
	// virtual are the joins of protected tables this statement's SELECTs
	// read (unitjoin.go), by lower-case name; written is how each column
	// they renamed was written.
	virtual map[string]*UnitJoin
	written map[*sqlparser.ColName]string
}

func (c *classifier) isProtected(t sqlparser.TableName) bool {
	return !t.IsEmpty() && c.protected(t.DbQualifier.String(), strings.ToLower(t.Name.String()))
}

func (c *classifier) statement(tree sqlparser.Statement) (Statement, error) {
	switch s := tree.(type) {
	case sqlparser.SelectStatement:
		return c.selectOrWrapped(s)
	case *sqlparser.Explain:
		inner, isSelect := s.Statement.(sqlparser.SelectStatement)
		if !isSelect {
			st, err := c.statement(s.Statement)
			if err != nil || st.Kind == KindPassthrough {
				return Statement{Kind: KindPassthrough}, err
			}
			return Statement{}, Errorf(CodeNotSupported, "EXPLAIN applies to DP aggregate queries: EXPLAIN SELECT COUNT(*) FROM t ...")
		}
		if _, prot := c.references(inner); len(prot) == 0 {
			return Statement{Kind: KindPassthrough}, nil
		}
		if s.Analyze {
			return Statement{}, Errorf(CodeNotSupported, "EXPLAIN ANALYZE is not supported over protected tables: use EXPLAIN SELECT ... to see the plan, cost and expected error without spending budget, then run the query itself")
		}
		st, err := c.selectOrWrapped(inner)
		if err != nil {
			return Statement{}, err
		}
		if st.Kind != KindAggregate && st.Kind != KindPostProcess {
			return Statement{}, Errorf(CodeNotSupported, "EXPLAIN shows the DP plan of aggregate queries (COUNT/SUM/AVG); this statement is answered from the declared domain, or returns no rows, at no privacy cost")
		}
		st.Kind = KindExplain
		return st, nil
	case *sqlparser.Show, *sqlparser.Use, *sqlparser.Set, *sqlparser.Begin, *sqlparser.Commit,
		*sqlparser.Rollback, *sqlparser.Savepoint, *sqlparser.RollbackSavepoint, *sqlparser.ReleaseSavepoint,
		*sqlparser.Kill, *sqlparser.Flush, *sqlparser.OtherRead, *sqlparser.OtherAdmin,
		*sqlparser.LockTables, *sqlparser.UnlockTables, *sqlparser.Analyze, *sqlparser.Execute,
		*sqlparser.Deallocate:
		// Metadata and session statements: the schema-only database
		// answers them, even when they name a protected table, unless a
		// subquery in them reads one.
		if reads := c.reads(tree); len(reads) > 0 {
			return Statement{}, refuseSubquery(reads[0])
		}
		return Statement{Kind: KindPassthrough}, nil
	case *sqlparser.Prepare:
		if !strings.HasPrefix(s.Expr, "@") {
			sts, err := ParseEnv(s.Expr, Env{Protected: c.protected, Columns: c.columns, Private: c.private, Public: c.public, Now: c.now})
			if err != nil {
				return Statement{}, err
			}
			for _, st := range sts {
				if st.Kind != KindPassthrough {
					return Statement{}, Errorf(CodeNotSupported, "prepared statements over protected tables are not supported; send the query as text with literal values")
				}
			}
		}
		return Statement{Kind: KindPassthrough}, nil
	default:
		// Writes, DDL, procedures and anything else: refused when they
		// touch a protected table at all.
		if _, prot := c.references(tree); len(prot) > 0 {
			return Statement{}, Errorf(CodeDPRefused, "table '%s' is protected and read-only through dpproxy: INSERT, UPDATE, DELETE, LOAD and DDL are refused; dpproxy answers aggregate queries only: SELECT COUNT(*) ... [GROUP BY ...]", strings.ToLower(prot[0].Name.String()))
		}
		return Statement{Kind: KindPassthrough}, nil
	}
}

func refuseSubquery(t sqlparser.TableName) *Error {
	return Errorf(CodeDPRefused, "subqueries, derived tables and joins over the protected table '%s' are not supported: dpproxy answers one aggregate query per statement over one table, e.g. SELECT a, COUNT(*) FROM %s WHERE ... GROUP BY a", strings.ToLower(t.Name.String()), strings.ToLower(t.Name.String()))
}

var (
	tableNameType = reflect.TypeOf(sqlparser.TableName{})
	colNamePtr    = reflect.TypeOf((*sqlparser.ColName)(nil))
	starExprPtr   = reflect.TypeOf((*sqlparser.StarExpr)(nil))
	selectPtr     = reflect.TypeOf((*sqlparser.Select)(nil))
	setOpPtr      = reflect.TypeOf((*sqlparser.SetOp)(nil))
	subqueryPtr   = reflect.TypeOf((*sqlparser.Subquery)(nil))
)

// walk visits every node reachable from v through exported fields, slices
// and interfaces; visit returns false to skip a node's children. It is
// reflection-based so that no statement type can hide a table name from it.
func walk(v reflect.Value, visit func(reflect.Value) bool, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			walk(v.Elem(), visit, seen)
		}
		return
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
	}
	if !visit(v) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		walk(v.Elem(), visit, seen)
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).IsExported() {
				walk(v.Field(i), visit, seen)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			walk(v.Index(i), visit, seen)
		}
	}
}

// references lists every table name in node (FROM clauses, DML targets, DDL
// names...; column qualifiers and t.* are not table references), and the
// protected ones among them.
func (c *classifier) references(node any) (all, prot []sqlparser.TableName) {
	walk(reflect.ValueOf(node), func(v reflect.Value) bool {
		switch v.Type() {
		case colNamePtr, starExprPtr:
			return false
		case tableNameType:
			if v.CanInterface() {
				t := v.Interface().(sqlparser.TableName)
				if !t.IsEmpty() {
					all = append(all, t)
					if c.isProtected(t) {
						prot = append(prot, t)
					}
				}
			}
			return false
		}
		return true
	}, map[uintptr]bool{})
	return all, prot
}

// reads lists the protected tables that the queries (SELECT, subqueries)
// inside node name.
func (c *classifier) reads(node any) []sqlparser.TableName {
	var out []sqlparser.TableName
	walk(reflect.ValueOf(node), func(v reflect.Value) bool {
		switch v.Type() {
		case selectPtr, setOpPtr, subqueryPtr:
			if v.CanInterface() {
				_, prot := c.references(v.Interface())
				out = append(out, prot...)
			}
			return false
		}
		return true
	}, map[uintptr]bool{})
	return out
}

// hasSubquery reports whether node holds a subquery (in an expression, a
// derived table or a CTE).
func hasSubquery(node any) bool {
	found := false
	walk(reflect.ValueOf(node), func(v reflect.Value) bool {
		if v.Type() == subqueryPtr {
			found = true
		}
		return !found
	}, map[uintptr]bool{})
	return found
}

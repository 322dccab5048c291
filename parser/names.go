package parser

import (
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// Name resolution: columns, qualifiers, select-list aliases and
// positions, in MySQL's order, before anything is judged.

// checkNames resolves every column reference of the query block in MySQL's
// order — select list, WHERE, GROUP BY, HAVING, ORDER BY — and returns
// MySQL's 1054 for the first that names no column: a qualifier that is not
// the table, or (when the classifier has Columns) a column the table does
// not have. GROUP BY, HAVING and ORDER BY may also name a select-list item
// (its alias, or the expression as written), and take positions (GROUP BY
// 1). Nothing else is judged here, so an unknown column wins over any
// refusal, as in MySQL.
func (b *selectBuilder) checkNames() error {
	sel := b.sel
	var itemNames []string
	for _, se := range sel.SelectExprs {
		if _, ok := se.(*sqlparser.AliasedExpr); ok {
			itemNames = append(itemNames, b.item(se).Alias)
		}
	}
	isItem := func(name string) bool {
		for _, n := range itemNames {
			if strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
	// check walks an expression; items says whether an unqualified name
	// may be a select-list item.
	check := func(node sqlparser.SQLNode, clause string, items bool) error {
		return sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
			switch x := n.(type) {
			case *sqlparser.StarExpr:
				if !x.TableName.IsEmpty() && !b.qualifierOK(x.TableName) && !b.qualifiesAJoin(x.TableName) {
					return false, Errorf(CodeBadField, "Unknown column '%s.*' in '%s'", x.TableName.Name.String(), clause)
				}
			case *sqlparser.FuncExpr:
				// COUNT(DISTINCT c) of a private column: compile answers it
				// for the table's privacy unit (the number of units) and
				// refuses it for any other column.
				if c := countDistinctColumn(x); c != nil {
					resolved, err := b.column(c, clause)
					if err != nil {
						return false, err
					}
					if b.c.private != nil && !b.dimName(resolved) && b.c.private(strings.ToLower(b.table.Name.String()), resolved) {
						return false, nil
					}
					return false, b.checkColumn(c, resolved, clause)
				}
			case *sqlparser.ColName:
				if isVariable(x) {
					return false, nil
				}
				resolved, err := b.column(x, clause)
				if err != nil {
					return false, err
				}
				name := x.Name.String()
				if items && x.Qualifier.IsEmpty() && isItem(name) && !b.isPrivate(name) {
					return false, nil
				}
				return false, b.checkColumn(x, resolved, clause)
			case *sqlparser.Subquery:
				return false, nil // refused elsewhere; its names are its own
			}
			return true, nil
		}, node)
	}
	for _, se := range sel.SelectExprs {
		if err := check(se, "field list", false); err != nil {
			return err
		}
	}
	if sel.Where != nil && sel.Where.Expr != nil {
		if err := check(sel.Where.Expr, "where clause", false); err != nil {
			return err
		}
	}
	positions := func(e sqlparser.Expr, clause string) error {
		if v, ok := unparen(e).(*sqlparser.SQLVal); ok && v.Type == sqlparser.IntVal {
			if n, err := strconv.Atoi(string(v.Val)); err != nil || n < 1 || n > len(sel.SelectExprs) {
				return Errorf(CodeBadField, "Unknown column '%s' in '%s'", v.Val, clause)
			}
		}
		return nil
	}
	for _, g := range sel.GroupBy {
		if err := positions(g, "group statement"); err != nil {
			return err
		}
		if err := check(g, "group statement", true); err != nil {
			return err
		}
	}
	if sel.Having != nil && sel.Having.Expr != nil {
		if err := check(sel.Having.Expr, "having clause", true); err != nil {
			return err
		}
	}
	for _, o := range sel.OrderBy {
		if err := positions(o.Expr, "order clause"); err != nil {
			return err
		}
		if err := check(o.Expr, "order clause", true); err != nil {
			return err
		}
	}
	return nil
}

// colText is a column reference as written, with its qualifiers.
func colText(c *sqlparser.ColName) string {
	full := c.Name.String()
	if !c.Qualifier.IsEmpty() {
		full = c.Qualifier.Name.String() + "." + full
		if !c.Qualifier.DbQualifier.IsEmpty() {
			full = c.Qualifier.DbQualifier.String() + "." + full
		}
	}
	return full
}

func isBadField(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == CodeBadField
}

func isVariable(c *sqlparser.ColName) bool {
	return c.Qualifier.IsEmpty() && strings.HasPrefix(c.Name.String(), "@")
}

// qualifierOK reports whether q names the query's table: its name, its
// alias, or schema.table.
func (b *selectBuilder) qualifierOK(q sqlparser.TableName) bool {
	name := q.Name.String()
	if q.DbQualifier.IsEmpty() {
		return strings.EqualFold(name, b.table.Name.String()) || (b.alias != "" && strings.EqualFold(name, b.alias))
	}
	if !strings.EqualFold(name, b.table.Name.String()) {
		return false
	}
	if !b.table.DbQualifier.IsEmpty() {
		return strings.EqualFold(q.DbQualifier.String(), b.table.DbQualifier.String())
	}
	return b.c.protected(q.DbQualifier.String(), strings.ToLower(name))
}

// column resolves a column reference to its lower-case name: alias.col
// for a column of a joined public table.
func (b *selectBuilder) column(c *sqlparser.ColName, clause string) (string, error) {
	if len(b.joins) > 0 {
		if name, found, err := b.joinColumn(c, clause); found || err != nil {
			return name, err
		}
	}
	if !c.Qualifier.IsEmpty() && !b.qualifierOK(c.Qualifier) {
		return "", Errorf(CodeBadField, "Unknown column '%s' in '%s'", colText(c), clause)
	}
	return strings.ToLower(c.Name.String()), nil
}

// byAlias finds the select item whose written alias is name.
func (b *selectBuilder) byAlias(name string) int {
	for i, it := range b.items {
		if it.explicit && strings.EqualFold(it.Alias, name) {
			return i
		}
	}
	return -1
}

// position resolves GROUP BY 1 / ORDER BY 2.
func (b *selectBuilder) position(e sqlparser.Expr, clause string) (int, bool, error) {
	v, ok := e.(*sqlparser.SQLVal)
	if !ok || v.Type != sqlparser.IntVal {
		return 0, false, nil
	}
	n, err := strconv.Atoi(string(v.Val))
	if err != nil || n < 1 || n > len(b.items) {
		return 0, true, Errorf(CodeBadField, "Unknown column '%s' in '%s'", v.Val, clause)
	}
	return n - 1, true, nil
}

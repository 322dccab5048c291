package mysqlfront

import (
	"errors"
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/vt/sqlparser"

	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/parser"
)

// checkPrivacyOptions refuses a SET that assigns a privacy option
// (@dp_epsilon, @dp_rho, @dp_max_stderr) a literal outside its documented
// range, before anything is set (engine.CheckOption; error 3900 naming the
// range), as MySQL refuses a bad value for a system variable. An
// expression that is not a literal is left to the batch, which checks
// every option again.
func checkPrivacyOptions(stmt string) error {
	if !strings.Contains(strings.ToLower(stmt), "@dp_") {
		return nil
	}
	ast, err := parser.ParseAST(stmt)
	set, ok := ast.(*sqlparser.Set)
	if err != nil || !ok {
		return nil // GMS reports what it cannot run
	}
	for _, e := range set.Exprs {
		if e.Scope != sqlparser.SetScope_User || e.Name == nil {
			continue
		}
		v, ok := literalValue(e.Expr)
		if !ok {
			continue
		}
		if err := engine.CheckOption(e.Name.Name.String(), v); err != nil {
			var pe *parser.Error
			if errors.As(err, &pe) {
				return mysql.NewSQLError(pe.Code, "HY000", "%s", pe.Message)
			}
			return err
		}
	}
	return nil
}

// literalValue is a literal's value as a session variable holds it: a
// number as float64, a string, NULL as nil; ok is false for anything else.
func literalValue(e sqlparser.Expr) (any, bool) {
	switch e := e.(type) {
	case *sqlparser.NullVal:
		return nil, true
	case *sqlparser.SQLVal:
		switch e.Type {
		case sqlparser.StrVal:
			return string(e.Val), true
		case sqlparser.IntVal, sqlparser.FloatVal:
			f, err := strconv.ParseFloat(string(e.Val), 64)
			return f, err == nil
		}
	case *sqlparser.UnaryExpr:
		if v, ok := literalValue(e.Expr); ok {
			if f, isNum := v.(float64); isNum {
				switch e.Operator {
				case sqlparser.UMinusStr:
					return -f, true
				case sqlparser.UPlusStr:
					return f, true
				}
			}
		}
	}
	return nil, false
}

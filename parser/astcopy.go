package parser

import (
	"reflect"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// cloneAST returns a deep copy of a vitess AST node, so that an expression
// substituted in several places, or a CTE read twice, is never shared
// between two places that are rewritten separately.
func cloneAST[T any](x T) T {
	v := reflect.ValueOf(&x).Elem()
	out := reflect.New(v.Type()).Elem()
	out.Set(cloneValue(v))
	return out.Interface().(T)
}

func cloneValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(cloneValue(v.Elem()))
		return c
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(cloneValue(v.Elem()))
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			c.Index(i).Set(cloneValue(v.Index(i)))
		}
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v) // unexported fields are values (strings, numbers): shared safely
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				c.Field(i).Set(cloneValue(v.Field(i)))
			}
		}
		return c
	}
	return v
}

// rewriteColumns replaces each column reference in node that f maps with
// f's expression, without entering subqueries (their names are their own
// scope) and without visiting what it put in. node must be a pointer (or
// hold one) so that its expressions can be set; an expression held in a
// field typed *ColName (not Expr) is left as it is.
func rewriteColumns(node any, f func(*sqlparser.ColName) (sqlparser.Expr, bool)) {
	rewriteValue(reflect.ValueOf(node), f)
}

func rewriteValue(v reflect.Value, f func(*sqlparser.ColName) (sqlparser.Expr, bool)) {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		switch x := v.Interface().(type) {
		case *sqlparser.ColName:
			if to, ok := f(x); ok && v.CanSet() && reflect.TypeOf(to).AssignableTo(v.Type()) {
				v.Set(reflect.ValueOf(to))
			}
			return
		case *sqlparser.Subquery:
			return
		}
		rewriteValue(v.Elem(), f)
	case reflect.Pointer:
		if v.IsNil() || v.Type() == subqueryPtr {
			return
		}
		rewriteValue(v.Elem(), f)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				rewriteValue(v.Field(i), f)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			rewriteValue(v.Index(i), f)
		}
	}
}

package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// AdultColumns are the demo table's columns and their server types.
var AdultColumns = []struct{ Name, Type string }{
	{"age", "BIGINT"}, {"workclass", "VARCHAR(32)"}, {"education", "VARCHAR(32)"}, {"marital_status", "VARCHAR(32)"},
	{"occupation", "VARCHAR(32)"}, {"race", "VARCHAR(32)"}, {"sex", "VARCHAR(32)"}, {"hours_per_week", "BIGINT"}, {"income", "VARCHAR(32)"},
}

// CopyAdult copies the demo table adult from an SQLite database into
// table on a server (driver "pgx" or "mysql"), creating it: PostgreSQL
// with COPY, MariaDB with LOAD DATA LOCAL INFILE, both streamed.
func CopyAdult(ctx context.Context, from *sql.DB, driver string, to *sql.DB, table string) (int64, error) {
	var defs, names []string
	for _, c := range AdultColumns {
		defs = append(defs, c.Name+" "+c.Type)
		names = append(names, c.Name)
	}
	create := "CREATE TABLE " + table + " (" + strings.Join(defs, ", ") + ")"
	if driver == "mysql" {
		create += " ENGINE=InnoDB CHARACTER SET utf8mb4"
	}
	if _, err := to.ExecContext(ctx, create); err != nil {
		return 0, err
	}
	rows, err := from.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM adult")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n atomic.Int64
	next := func(vals []any) (bool, error) {
		if !rows.Next() {
			return false, rows.Err()
		}
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		n.Add(1)
		return true, rows.Scan(ptrs...)
	}
	switch driver {
	case "pgx":
		conn, err := to.Conn(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		err = conn.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			_, err := pc.CopyFrom(ctx, pgx.Identifier(strings.Split(table, ".")), names, &copySource{next: next, vals: make([]any, len(names))})
			return err
		})
		return n.Load(), err
	case "mysql":
		pr, pw := io.Pipe()
		escape := strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`)
		go func() {
			vals := make([]any, len(names))
			var b strings.Builder
			for {
				ok, err := next(vals)
				if err != nil || !ok {
					pw.CloseWithError(err)
					return
				}
				b.Reset()
				for i, v := range vals {
					if i > 0 {
						b.WriteByte('\t')
					}
					if v == nil {
						b.WriteString(`\N`)
					} else {
						switch v := v.(type) {
						case int64:
							b.WriteString(strconv.FormatInt(v, 10))
						case []byte:
							b.WriteString(escape.Replace(string(v)))
						default:
							b.WriteString(escape.Replace(fmt.Sprint(v)))
						}
					}
				}
				b.WriteByte('\n')
				if _, err := io.WriteString(pw, b.String()); err != nil {
					return
				}
			}
		}()
		name := fmt.Sprintf("dpproxy-load-%p", pr)
		mysql.RegisterReaderHandler(name, func() io.Reader { return pr })
		defer mysql.DeregisterReaderHandler(name)
		_, err := to.ExecContext(ctx, "LOAD DATA LOCAL INFILE 'Reader::"+name+"' INTO TABLE "+table+" ("+strings.Join(names, ", ")+")")
		pr.Close()
		return n.Load(), err
	}
	return 0, fmt.Errorf("unknown driver %q", driver)
}

type copySource struct {
	next func([]any) (bool, error)
	vals []any
	err  error
}

func (c *copySource) Next() bool {
	ok, err := c.next(c.vals)
	c.err = err
	return ok && err == nil
}

func (c *copySource) Values() ([]any, error) {
	out := make([]any, len(c.vals))
	for i, v := range c.vals {
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		out[i] = v
	}
	return out, nil
}

func (c *copySource) Err() error { return c.err }

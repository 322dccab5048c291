package gmsengine

import (
	"context"
	"sync"
	"testing"

	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/sql"
)

// TestConcurrentEngines builds and queries engines from several goroutines
// at once; under -race (as CI runs it) an unserialised build is reported.
func TestConcurrentEngines(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := memory.NewDatabase("d")
			pro := memory.NewDBProvider(db)
			eng := NewDefault(pro)
			defer eng.Close()
			ctx := sql.NewContext(context.Background(), sql.WithSession(memory.NewSession(sql.NewBaseSession(), pro)))
			_, iter, _, err := eng.Query(ctx, "SELECT 1 + 1")
			if err != nil {
				t.Error(err)
				return
			}
			rows, err := sql.RowIterToRows(ctx, iter)
			if err != nil || len(rows) != 1 {
				t.Errorf("rows %v, %v", rows, err)
			}
		}()
	}
	wg.Wait()
}

// Package demo generates dpproxy's demo data set in an SQLite file: a
// synthetic census table adult in the style of the UCI Adult data, and
// events, a synthetic web-shop event log (events.go: user_id, ts, country,
// device, page, duration_s, amount, and the open columns referrer and
// search_term from traffic.go; EventsPerRow events per adult row, many per
// user), and users, one row per events user (users.go: user_id,
// signup_date, plan, country, age_band). Their columns and domains are the
// ones the embedded demo catalog (catalog.Demo) declares.
//
// The data is synthetic and deterministic: it comes from a fixed-seed
// splitmix64 generator and integer arithmetic only, so the same row count
// gives the same rows, and the same SQLite file, every time and on every
// platform. That generator is for demo data only: it is not, and must never
// be used as, a source of privacy noise.
package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // driver "sqlite"
)

// DefaultRows is the size of the demo table.
const DefaultRows = 50000

const (
	// seed is the generator's fixed seed.
	seed uint64 = 0x5eed_0ad0_1701
	// version changes whenever the generated content changes, so that files
	// written by an older generator are regenerated. (4: users and the
	// events' open columns, which came on two branches that each said 3.)
	version = 4
	// userVersion is the PRAGMA user_version that marks a file as a demo
	// database ("dp" 0xde 0x01). Generate only overwrites files that carry it
	// or that hold no tables at all.
	userVersion = 0x6470de01
)

// Generate makes path an SQLite database holding the demo table adult with
// the given number of rows. If path already is a demo database written by
// this generator with that many rows, Generate leaves it alone; if it is
// another demo database (an older generator, another row count), Generate
// replaces it; if it is any other non-empty database or file, Generate fails
// rather than overwrite it.
//
// The content depends only on rows: it is written in one transaction to a
// temporary file in the same directory (created if missing), which is then
// renamed onto path, so readers never see a partial table. The file is
// created with mode 0600.
func Generate(ctx context.Context, path string, rows int) error {
	if rows < 0 {
		return fmt.Errorf("demo: negative row count %d", rows)
	}
	if path == "" || strings.Contains(path, "?") || strings.HasPrefix(path, "file:") {
		return fmt.Errorf("demo: unsupported database path %q", path)
	}
	ok, err := upToDate(ctx, path, rows)
	if err != nil || ok {
		return err
	}
	return build(ctx, path, rows, EventsPerRow*rows, seed)
}

// upToDate reports whether path is a demo database with the wanted content,
// and fails if path exists but is not a demo database or an empty one.
func upToDate(ctx context.Context, path string, rows int) (bool, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("demo: %w", err)
	case !fi.Mode().IsRegular():
		return false, fmt.Errorf("demo: %s is not a regular file", path)
	case fi.Size() == 0:
		return false, nil
	}
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return false, fmt.Errorf("demo: %w", err)
	}
	defer db.Close()
	var uv, objects int64
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&uv); err != nil {
		return false, fmt.Errorf("demo: %s exists and is not a readable SQLite database: %w", path, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&objects); err != nil {
		return false, fmt.Errorf("demo: %s exists and is not a readable SQLite database: %w", path, err)
	}
	if uv != userVersion {
		if objects == 0 {
			return false, nil
		}
		return false, fmt.Errorf("demo: %s exists and is not a dpproxy demo database; refusing to overwrite it", path)
	}
	var v, s, r, n int64
	if err := db.QueryRowContext(ctx, "SELECT version, seed, rows FROM dpproxy_demo").Scan(&v, &s, &r); err != nil {
		return false, nil // a damaged demo database: regenerate
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM adult").Scan(&n); err != nil {
		return false, nil
	}
	var ne int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&ne); err != nil {
		return false, nil
	}
	var nu int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM users").Scan(&nu); err != nil {
		return false, nil
	}
	return v == version && uint64(s) == seed && r == int64(rows) && n == int64(rows) && ne == EventsPerRow*int64(rows) && (nu > 0) == (ne > 0), nil
}

const createAdult = `CREATE TABLE adult (
	age INTEGER,
	workclass TEXT,
	education TEXT,
	marital_status TEXT,
	occupation TEXT,
	race TEXT,
	sex TEXT,
	hours_per_week INTEGER,
	income TEXT
)`

// batch is the number of rows one prepared INSERT writes.
const batch = 128

// insertAdult is an INSERT of n rows.
func insertAdult(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO adult (age, workclass, education, marital_status, occupation, race, sex, hours_per_week, income) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// build writes the demo database: rows adult rows and events events rows.
func build(ctx context.Context, path string, rows, events int, seed uint64) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	tmp := f.Name()
	if err := f.Close(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()

	// The file is private until the rename, so it needs no journal and no
	// syncs until then.
	db, err := sql.Open("sqlite", tmp+"?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := fill(ctx, db, rows, events, seed); err != nil {
		db.Close()
		return fmt.Errorf("demo: generating %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if d, err := os.Open(dir); err == nil { // best effort: make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fill(ctx context.Context, db *sql.DB, rows, events int, seed uint64) error {
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range []string{
		createAdult,
		"CREATE TABLE dpproxy_demo (version INTEGER, seed INTEGER, rows INTEGER)",
		fmt.Sprintf("INSERT INTO dpproxy_demo VALUES (%d, %d, %d)", version, int64(seed), rows),
		fmt.Sprintf("PRAGMA user_version = %d", userVersion),
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	g := &generator{r: rng{s: seed}}
	err = insertBatched(ctx, tx, rows, insertAdult, func(args []any, n int) []any {
		for range n {
			p := g.person()
			args = append(args,
				p.age, workclasses[p.workclass], educations[p.education], maritalStatuses[p.marital],
				occupations[p.occupation], races[p.race], sexes[p.sex], p.hours, incomes[p.income])
		}
		return args
	})
	if err != nil {
		return err
	}
	if err := fillEvents(ctx, tx, events, seed); err != nil {
		return err
	}
	return tx.Commit()
}

// insertBatched inserts rows rows in multi-row INSERTs of batch rows
// (insertSQL(n) is the statement for n rows), each batch's arguments
// appended by next(args, n) for its n rows, in order.
func insertBatched(ctx context.Context, tx *sql.Tx, rows int, insertSQL func(n int) string, next func(args []any, n int) []any) error {
	full, err := tx.PrepareContext(ctx, insertSQL(batch))
	if err != nil {
		return err
	}
	defer full.Close()
	var args []any
	for done := 0; done < rows; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(batch, rows-done)
		args = next(args[:0], n)
		stmt := full
		if n < batch {
			if stmt, err = tx.PrepareContext(ctx, insertSQL(n)); err != nil {
				return err
			}
			defer stmt.Close()
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// rng is splitmix64 (Steele, Lea, Flood 2014): deterministic, portable and
// fast. Not a noise source.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a uniform integer in [0, n), n > 0 (Lemire's method).
func (r *rng) below(n uint64) uint64 {
	hi, lo := bits.Mul64(r.next(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(r.next(), n)
		}
	}
	return hi
}

// pick returns index i with probability w[i] / sum(w).
func (r *rng) pick(w []int64) int {
	var total int64
	for _, x := range w {
		total += x
	}
	x := int64(r.below(uint64(total)))
	for i, wi := range w {
		if x < wi {
			return i
		}
		x -= wi
	}
	panic("demo: pick: unreachable")
}

// Domains, in the order of the demo catalog.
var (
	workclasses     = []string{"Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov", "Without-pay", "Never-worked"}
	educations      = []string{"Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad", "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school", "Doctorate"}
	maritalStatuses = []string{"Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed", "Married-spouse-absent", "Married-AF-spouse"}
	occupations     = []string{"Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv", "Armed-Forces"}
	races           = []string{"White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"}
	sexes           = []string{"Female", "Male"}
	incomes         = []string{"<=50K", ">50K"}
)

// Indexes into the domains above.
const (
	wPrivate = iota
	wSelfEmpNotInc
	wSelfEmpInc
	wFederalGov
	wLocalGov
	wStateGov
	wWithoutPay
	wNeverWorked
)

const (
	ePreschool = iota
	e1st4th
	e5th6th
	e7th8th
	e9th
	e10th
	e11th
	e12th
	eHSGrad
	eSomeCollege
	eAssocVoc
	eAssocAcdm
	eBachelors
	eMasters
	eProfSchool
	eDoctorate
)

const (
	mMarriedCiv = iota
	mDivorced
	mNeverMarried
	mSeparated
	mWidowed
	mSpouseAbsent
	mMarriedAF
)

const (
	oTechSupport = iota
	oCraftRepair
	oOtherService
	oSales
	oExecManagerial
	oProfSpecialty
	oHandlersCleaners
	oMachineOp
	oAdmClerical
	oFarmingFishing
	oTransportMoving
	oPrivHouseServ
	oProtectiveServ
	oArmedForces
)

const (
	rWhite = iota
	rAsianPacIslander
	rAmerIndianEskimo
	rOther
	rBlack
)

const (
	sFemale = iota
	sMale
)

type person struct {
	age, hours                                                   int64
	workclass, education, marital, occupation, race, sex, income int
}

type generator struct{ r rng }

// person draws one row. Everything is integer arithmetic on fixed tables, so
// the result does not depend on the platform's floating point.
func (g *generator) person() person {
	r := &g.r
	var p person
	p.sex = r.pick([]int64{33, 67})
	p.age = 17 + int64(r.pick(ageWeights))
	p.race = r.pick([]int64{854, 32, 10, 8, 96})
	p.education = r.pick(educationWeights(p.age))
	p.workclass = r.pick(workclassWeights(p.education, p.age))
	p.marital = r.pick(maritalWeights(p.age, p.sex))
	p.occupation = r.pick(occupationWeights(p.education, p.sex, p.workclass))
	p.hours = g.hours(p)
	if int64(r.below(1_000_000)) < incomeProbability(p) {
		p.income = 1
	}
	return p
}

// ageWeights[a-17] is the weight of age a: linear between knots, mode in the
// early thirties, a long tail to 90.
var ageWeights = func() []int64 {
	knots := [][2]int64{{17, 120}, {19, 190}, {22, 215}, {27, 250}, {32, 262}, {37, 258}, {42, 232}, {47, 200},
		{52, 152}, {57, 112}, {62, 80}, {67, 44}, {72, 24}, {77, 12}, {82, 6}, {90, 2}}
	w := make([]int64, 90-17+1)
	for k := 0; k+1 < len(knots); k++ {
		a0, w0, a1, w1 := knots[k][0], knots[k][1], knots[k+1][0], knots[k+1][1]
		for a := a0; a <= a1; a++ {
			w[a-17] = w0 + (w1-w0)*(a-a0)/(a1-a0)
		}
	}
	return w
}()

func educationWeights(age int64) []int64 {
	switch {
	case age <= 18:
		return []int64{1, 1, 2, 5, 10, 60, 120, 80, 200, 60, 0, 0, 0, 0, 0, 0}
	case age <= 21:
		return []int64{1, 1, 2, 5, 5, 20, 30, 20, 330, 500, 20, 20, 10, 0, 0, 0}
	case age <= 24:
		return []int64{1, 3, 6, 12, 12, 25, 30, 15, 310, 300, 40, 40, 170, 10, 0, 0}
	case age < 60:
		return []int64{2, 4, 8, 15, 15, 25, 30, 12, 320, 210, 45, 35, 175, 62, 21, 16}
	default:
		return []int64{3, 10, 20, 60, 25, 30, 30, 10, 330, 170, 30, 25, 130, 60, 25, 20}
	}
}

// educationGroup: 0 below high school, 1 HS-grad, 2 some college or
// associate, 3 bachelors, 4 graduate degree.
func educationGroup(e int) int {
	switch {
	case e < eHSGrad:
		return 0
	case e == eHSGrad:
		return 1
	case e < eBachelors:
		return 2
	case e == eBachelors:
		return 3
	default:
		return 4
	}
}

func workclassWeights(education int, age int64) []int64 {
	base := [5][8]int64{
		{800, 80, 15, 8, 40, 20, 2, 0},
		{800, 75, 25, 25, 45, 25, 1, 0},
		{770, 70, 30, 40, 50, 40, 1, 0},
		{700, 80, 60, 40, 80, 40, 0, 0},
		{480, 110, 90, 60, 120, 140, 0, 0},
	}[educationGroup(education)]
	w := base[:]
	switch {
	case age < 25:
		w[wSelfEmpNotInc] /= 3
		w[wSelfEmpInc] /= 3
		w[wFederalGov] /= 2
		w[wLocalGov] /= 2
		w[wStateGov] /= 2
		if age <= 23 {
			w[wNeverWorked] = 6
		}
	case age >= 60:
		w[wSelfEmpNotInc] *= 2
		w[wSelfEmpInc] = w[wSelfEmpInc] * 3 / 2
	}
	if education == eDoctorate {
		w[wStateGov] *= 2
	}
	if education == eProfSchool {
		w[wSelfEmpNotInc] *= 2
		w[wSelfEmpInc] *= 2
	}
	return w
}

// maritalByAge[sex][band] are the weights of the marital statuses by age
// band (17-21, 22-24, 25-29, 30-34, 35-44, 45-54, 55-64, 65+). As in the UCI
// data, far fewer women than men are Married-civ-spouse.
var maritalByAge = [2][8][7]int64{
	sFemale: {
		{20, 3, 960, 7, 0, 10, 1},
		{100, 30, 830, 25, 1, 13, 1},
		{190, 120, 610, 50, 3, 25, 2},
		{230, 230, 440, 70, 8, 20, 2},
		{250, 330, 310, 75, 15, 20, 1},
		{230, 400, 200, 70, 80, 20, 0},
		{200, 380, 120, 50, 230, 20, 0},
		{150, 200, 80, 20, 540, 10, 0},
	},
	sMale: {
		{30, 2, 960, 3, 0, 5, 0},
		{150, 10, 820, 10, 0, 10, 1},
		{460, 45, 460, 20, 1, 13, 1},
		{680, 80, 200, 30, 2, 17, 1},
		{770, 110, 90, 30, 4, 15, 1},
		{800, 120, 50, 22, 10, 14, 1},
		{810, 100, 35, 16, 30, 14, 0},
		{740, 70, 30, 10, 150, 10, 0},
	},
}

func maritalWeights(age int64, sex int) []int64 {
	var band int
	switch {
	case age <= 21:
		band = 0
	case age <= 24:
		band = 1
	case age <= 29:
		band = 2
	case age <= 34:
		band = 3
	case age <= 44:
		band = 4
	case age <= 54:
		band = 5
	case age <= 64:
		band = 6
	default:
		band = 7
	}
	return maritalByAge[sex][band][:]
}

func occupationWeights(education, sex, workclass int) []int64 {
	w := [5][14]int64{
		// Tech Craft Other Sales Exec Prof Handl Mach Adm Farm Trans Priv Prot Armed
		{5, 160, 230, 80, 30, 10, 110, 130, 50, 70, 80, 20, 10, 0},
		{20, 180, 120, 110, 80, 25, 60, 95, 140, 40, 75, 5, 20, 1},
		{45, 130, 100, 130, 120, 70, 40, 50, 170, 25, 50, 3, 30, 1},
		{40, 50, 40, 150, 260, 270, 10, 15, 100, 15, 15, 1, 20, 1},
		{15, 10, 10, 50, 220, 640, 3, 3, 25, 8, 4, 0, 10, 1},
	}[educationGroup(education)]
	// Percent multipliers by sex.
	var m [14]int64
	if sex == sMale {
		m = [14]int64{100, 180, 70, 100, 110, 95, 150, 120, 50, 160, 180, 10, 170, 200}
	} else {
		m = [14]int64{120, 15, 170, 100, 80, 110, 40, 70, 240, 30, 15, 400, 30, 10}
	}
	for i := range w {
		w[i] = w[i] * m[i]
	}
	switch workclass {
	case wSelfEmpNotInc:
		w[oFarmingFishing] *= 4
		w[oCraftRepair] *= 2
	case wSelfEmpInc:
		w[oExecManagerial] *= 3
		w[oSales] *= 2
	case wFederalGov, wLocalGov, wStateGov:
		w[oAdmClerical] = w[oAdmClerical] * 3 / 2
		w[oProtectiveServ] *= 4
		if workclass == wStateGov {
			w[oProfSpecialty] = w[oProfSpecialty] * 3 / 2
		}
	}
	if workclass == wFederalGov {
		w[oArmedForces] *= 100
	} else {
		w[oArmedForces] = 0
	}
	if workclass != wPrivate {
		w[oPrivHouseServ] = 0
	}
	return w[:]
}

// Values for the hours of part-time (1-39) and long (41-99) working weeks.
var partTime, longHours = func() ([]int64, []int64) {
	part := make([]int64, 39) // hours 1..39
	for i := range part {
		part[i] = 8
	}
	for h, w := range map[int]int64{20: 250, 25: 100, 30: 150, 35: 160, 32: 40, 36: 40, 38: 50, 15: 60, 10: 40, 12: 30, 16: 30, 24: 40, 28: 30} {
		part[h-1] = w
	}
	long := make([]int64, 59) // hours 41..99
	for i := range long {
		long[i] = 3
	}
	for h, w := range map[int]int64{45: 200, 50: 260, 55: 90, 60: 130, 42: 30, 44: 30, 48: 50, 65: 30, 70: 30, 72: 10, 80: 20, 84: 8, 90: 6, 99: 10} {
		long[h-41] = w
	}
	return part, long
}()

func (g *generator) hours(p person) int64 {
	// Percent of part-time, 40-hour and long weeks.
	var part, full, long int64
	switch {
	case p.age <= 21:
		part, full = 65, 28
	case p.age <= 24:
		part, full = 25, 55
	case p.age >= 65:
		part, full = 50, 30
	default:
		part, full = 10, 55
	}
	if p.sex == sFemale {
		part += 20
		if part > 85 {
			part = 85
		}
		if part+full > 95 {
			full = 95 - part
		}
	}
	long = 100 - part - full
	switch {
	case p.workclass == wSelfEmpNotInc || p.workclass == wSelfEmpInc:
		moved := full / 2
		full, long = full-moved, long+moved
	case p.occupation == oExecManagerial || p.occupation == oProfSpecialty:
		moved := full / 4
		full, long = full-moved, long+moved
	}
	switch g.r.pick([]int64{part, full, long}) {
	case 0:
		return 1 + int64(g.r.pick(partTime))
	case 1:
		return 40
	default:
		return 41 + int64(g.r.pick(longHours))
	}
}

// sigmoid[i] is 10^6 / (1 + exp(-x)) for x = -10 + i/4, rounded.
var sigmoid = [81]int64{
	45, 58, 75, 96, 123, 158, 203, 261, 335,
	431, 553, 710, 911, 1170, 1501, 1927, 2473, 3173,
	4070, 5220, 6693, 8577, 10987, 14064, 17986, 22977, 29312,
	37327, 47426, 60087, 75858, 95349, 119203, 148047, 182426, 222700,
	268941, 320821, 377541, 437823, 500000, 562177, 622459, 679179, 731059,
	777300, 817574, 851953, 880797, 904651, 924142, 939913, 952574, 962673,
	970688, 977023, 982014, 985936, 989013, 991423, 993307, 994780, 995930,
	996827, 997527, 998073, 998499, 998830, 999089, 999290, 999447, 999569,
	999665, 999739, 999797, 999842, 999877, 999904, 999925, 999942, 999955,
}

// Logit contributions, in hundredths, to the chance of income >50K.
var (
	educationLogit  = [16]int64{-250, -230, -220, -200, -190, -180, -190, -140, 0, 30, 60, 60, 150, 200, 290, 270}
	workclassLogit  = [8]int64{0, -20, 60, 40, 0, -10, -600, -600}
	occupationLogit = [14]int64{30, -10, -140, 10, 70, 50, -100, -50, -40, -100, -20, -250, 20, 0}
	raceLogit       = [5]int64{0, 0, -30, -30, -30}
)

const incomeIntercept = -290

// incomeProbability is the chance, in millionths, that p earns >50K: a
// logistic model rising with education, age (peaking at 45-55), hours and
// marriage.
func incomeProbability(p person) int64 {
	s := int64(incomeIntercept) + educationLogit[p.education] + workclassLogit[p.workclass] +
		occupationLogit[p.occupation] + raceLogit[p.race]
	switch a := p.age; {
	case a <= 19:
		s -= 450
	case a <= 21:
		s -= 350
	case a <= 24:
		s -= 230
	case a <= 27:
		s -= 130
	case a <= 30:
		s -= 80
	case a <= 34:
		s -= 40
	case a <= 39:
	case a <= 44:
		s += 20
	case a <= 55:
		s += 40
	case a <= 59:
		s += 20
	case a <= 64:
		s -= 10
	case a <= 69:
		s -= 60
	default:
		s -= 120
	}
	switch p.marital {
	case mMarriedCiv, mMarriedAF:
		s += 200
	case mNeverMarried:
		s -= 60
	}
	switch h := p.hours; {
	case h < 20:
		s -= 170
	case h < 30:
		s -= 110
	case h < 35:
		s -= 60
	case h < 40:
		s -= 30
	case h == 40:
	case h < 45:
		s += 20
	case h < 50:
		s += 50
	default:
		s += 70
	}
	if p.sex == sMale {
		s += 20
	}
	// Interpolate the table; s is in hundredths, the table in quarters.
	s = min(max(s, -1000), 1000) + 1000
	i, f := s/25, s%25
	if i == 80 {
		return sigmoid[80]
	}
	return sigmoid[i] + (sigmoid[i+1]-sigmoid[i])*f/25
}

// dpproxy's client test for Node.js with mysql2 (promise API).
//
// Environment: DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER, DPPROXY_PASSWORD,
// DPPROXY_DB, DPPROXY_CA (optional: TLS verifying this CA), DPPROXY_FLOW
// (the standard flow, JSON). mysql2 is found through NODE_PATH.
//
// The flow runs twice: with query() (text protocol; mysql2 writes the
// parameters into the SQL) and with execute() (server-side prepared
// statements, COM_STMT_PREPARE/EXECUTE); the second run's steps are
// prefixed "prepared_". Then a pool, ping, changing database (COM_INIT_DB
// is not what mysql2 sends: it uses a USE statement) and a wrong password.
'use strict';

const fs = require('fs');
const mysql = require('mysql2/promise');

function emit(o) { process.stdout.write(JSON.stringify(o) + '\n'); }

function text(v) {
  if (v === null || v === undefined) return null;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  if (v instanceof Date) return v.toISOString();
  return String(v);
}

function errorOf(e) {
  return { code: e.errno || -1, sqlstate: e.sqlState || '', message: e.sqlMessage || String(e) };
}

function options(password) {
  const o = {
    host: process.env.DPPROXY_HOST,
    port: Number(process.env.DPPROXY_PORT),
    user: process.env.DPPROXY_USER,
    password: password,
    database: process.env.DPPROXY_DB || 'demo',
    // BIGINT and DOUBLE as strings, as they came
    supportBigNumbers: true,
    bigNumberStrings: true,
    decimalNumbers: false,
  };
  if (process.env.DPPROXY_CA) {
    o.ssl = { ca: fs.readFileSync(process.env.DPPROXY_CA), servername: '127.0.0.1' };
  }
  return o;
}

async function runFlow(conn, steps, prepared, prefix) {
  for (const st of steps) {
    const name = prefix + st.step;
    try {
      const params = st.params || [];
      const [rows, fields] = prepared
        ? await conn.execute({ sql: st.sql, rowsAsArray: true }, params)
        : await conn.query({ sql: st.sql, rowsAsArray: true }, params);
      if (!fields) {
        emit({ step: name });
      } else {
        emit({ step: name, columns: fields.map((f) => f.name), rows: rows.map((r) => r.map(text)) });
      }
    } catch (e) {
      if (!e.errno) throw e;
      emit({ step: name, error: errorOf(e) });
    }
  }
}

async function main() {
  const steps = JSON.parse(fs.readFileSync(process.env.DPPROXY_FLOW, 'utf8'));
  const password = process.env.DPPROXY_PASSWORD;

  const conn = await mysql.createConnection(options(password));
  await runFlow(conn, steps, false, '');
  await runFlow(conn, steps, true, 'prepared_');
  await conn.ping();
  const [[db]] = await conn.query({ sql: 'SELECT DATABASE()', rowsAsArray: true });
  const info = { ping: true, database: db[0], tls: !!(conn.connection.stream && conn.connection.stream.encrypted) };
  if (conn.connection.stream && conn.connection.stream.getCipher) {
    info.cipher = conn.connection.stream.getCipher().name;
  }
  emit({ step: 'connection', info });
  await conn.end();

  // A pool, as dashboards use one: two connections, one query each.
  const pool = mysql.createPool({ ...options(password), connectionLimit: 2 });
  const results = await Promise.all([
    pool.query({ sql: 'SELECT COUNT(*) AS n FROM adult WHERE income = ?', rowsAsArray: true }, ['>50K']),
    pool.query({ sql: 'SHOW FULL TABLES', rowsAsArray: true }),
  ]);
  emit({ step: 'pool', info: { count: text(results[0][0][0][0]), tables: results[1][0].map((r) => r.map(text)) } });
  await pool.end();

  try {
    const c = await mysql.createConnection(options(password + '-wrong'));
    await c.end();
    emit({ step: 'bad_password' });
  } catch (e) {
    emit({ step: 'bad_password', error: errorOf(e) });
  }
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});

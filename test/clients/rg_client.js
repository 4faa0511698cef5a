// Read-your-writes with replica_gate from Node.js (node-postgres).
//
// Write on the primary, take the token from the ParameterStatus the COMMIT
// brought back (no extra query), gate the read on the standby in one round
// trip, fall back to the primary when the standby is behind.
//
// Usage: node rg_client.js PRIMARY STANDBY ROUNDS BUDGETS FORM
//   BUDGETS  gate budgets in ms, comma-separated, used round after round
//   FORM     "function" (require_lsn) or "set" (SET replica_gate.require_lsn)
// A first read, before any write, has no token.
'use strict'
const { Client } = require('pg')

// node-postgres keeps no table of reported parameters: remember them.
function trackParameters (client) {
  client.reported = {}
  client.connection.on('parameterStatus', (msg) => {
    client.reported[msg.parameterName] = msg.parameterValue
  })
}

// Returns [value, onStandby]; token is null before the first write.
async function gatedRead (primary, standby, token, budgetMs, form) {
  // No parameters: sent as one simple query, the read only runs if the
  // gate passed.  SET takes no bind parameters: the token goes in as a
  // literal; no token is NULL for the function and '' for the SET form.
  const sql = form === 'set'
    ? `SET replica_gate.default_timeout = ${budgetMs};` +
      ` SET replica_gate.require_lsn = ${standby.escapeLiteral(token || '')};` +
      ' SELECT v FROM counter'
    : `SELECT replica_gate.require_lsn(${token === null ? 'NULL' : standby.escapeLiteral(token)}, ${budgetMs});` +
      ' SELECT v FROM counter'
  try {
    const results = await standby.query(sql)
    return [results[results.length - 1].rows[0].v, true]
  } catch (e) {
    if (e.code !== 'RG001') throw e // the standby is behind: use the primary
    const r = await primary.query('SELECT v FROM counter')
    return [r.rows[0].v, false]
  }
}

async function main () {
  const [primaryDsn, standbyDsn, roundsArg, budgetsArg, form] = process.argv.slice(2)
  const rounds = Number(roundsArg)
  const budgets = budgetsArg.split(',').map(Number)
  const primary = new Client({ connectionString: primaryDsn })
  trackParameters(primary)
  const standby = new Client({ connectionString: standbyDsn })
  trackParameters(standby)
  await primary.connect()
  await standby.connect()

  // The SET form waits only where the library is active in the session: a
  // preloaded library reports replica_gate.version at connection start.
  if (form === 'set' && standby.reported['replica_gate.version'] === undefined) {
    throw new Error('the standby session has no replica_gate: the SET form would not wait')
  }

  let [value, onStandby] = await gatedRead(primary, standby, null, budgets[0], form)
  let stale = value === 0 ? 0 : 1
  onStandby = onStandby ? 1 : 0
  let token = null
  for (let i = 1; i <= rounds; i++) {
    await primary.query('UPDATE counter SET v = $1', [i])
    // No token after a write is not "nothing to wait for": the primary is
    // not preloaded.
    const reported = primary.reported['replica_gate.last_commit_token']
    if (!reported || reported === token) {
      throw new Error(`round ${i}: no new token reported (${reported})`)
    }
    token = reported
    let here
    [value, here] = await gatedRead(primary, standby, token, budgets[(i - 1) % budgets.length], form)
    if (value !== i) stale++
    if (here) onStandby++
  }
  console.log(`node-postgres (${form}): ${rounds + 1} reads, ${onStandby} on standby, ` +
    `${rounds + 1 - onStandby} on primary, ${stale} stale`)
  await primary.end()
  await standby.end()
  process.exit(stale === 0 ? 0 : 1)
}

main().catch((e) => { console.error(e.message); process.exit(e.code === undefined ? 1 : 2) })

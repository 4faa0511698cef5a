// Read-your-writes with replica_gate from Node.js (node-postgres).
//
// Write on the primary, take the token from the ParameterStatus the COMMIT
// brought back (no extra query), gate the read on the standby in one round
// trip, fall back to the primary when the standby is behind.
//
// Usage: node rg_client.js PRIMARY_CONNINFO STANDBY_CONNINFO ROUNDS BUDGET_MS
'use strict'
const { Client } = require('pg')

// node-postgres keeps no table of reported parameters: remember them.
function trackParameters (client) {
  client.reported = {}
  client.connection.on('parameterStatus', (msg) => {
    client.reported[msg.parameterName] = msg.parameterValue
  })
}

// Returns [value, onStandby].
async function gatedRead (primary, standby, token, budgetMs) {
  // No parameters: sent as one simple query, the read only runs if the
  // gate passed.
  const sql = `SELECT replica_gate.require_lsn(${standby.escapeLiteral(token)}, ${budgetMs});` +
    ' SELECT v FROM counter'
  try {
    const results = await standby.query(sql)
    return [results[1].rows[0].v, true]
  } catch (e) {
    if (e.code !== 'RG001') throw e // the standby is behind: use the primary
    const r = await primary.query('SELECT v FROM counter')
    return [r.rows[0].v, false]
  }
}

async function main () {
  const [primaryDsn, standbyDsn, roundsArg, budgetArg] = process.argv.slice(2)
  const rounds = Number(roundsArg)
  const budgetMs = Number(budgetArg)
  const primary = new Client({ connectionString: primaryDsn })
  trackParameters(primary)
  const standby = new Client({ connectionString: standbyDsn })
  await primary.connect()
  await standby.connect()
  let token = null
  let onStandby = 0
  let stale = 0
  for (let i = 1; i <= rounds; i++) {
    await primary.query('UPDATE counter SET v = $1', [i])
    const reported = primary.reported['replica_gate.last_commit_lsn']
    if (!reported || reported === token) {
      throw new Error(`round ${i}: no new token reported (${reported})`)
    }
    token = reported
    const [value, here] = await gatedRead(primary, standby, token, budgetMs)
    if (value !== i) stale++
    if (here) onStandby++
  }
  console.log(`node-postgres: ${rounds} reads, ${onStandby} on standby, ` +
    `${rounds - onStandby} on primary, ${stale} stale`)
  await primary.end()
  await standby.end()
  process.exit(stale === 0 ? 0 : 1)
}

main().catch((e) => { console.error(e.message); process.exit(2) })

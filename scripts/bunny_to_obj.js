// Converts the npm package `bunny` (the Stanford bunny, public domain; exports `positions`
// and `cells`) to an OBJ surface in metres with z up: every position p = (x, y, z) becomes
// 0.01 * (x, -z, y), a +90 degree rotation about x (the package is y-up, ~9.7 units tall).
// Usage: node scripts/bunny_to_obj.js <path to the unpacked package dir> > bunny.obj
const path = require("path");
const dir = process.argv[2];
if (!dir) {
  console.error("usage: node bunny_to_obj.js <unpacked npm package dir>");
  process.exit(2);
}
const bunny = require(path.resolve(dir, "index.js"));
const fmt = (v) => Number(v.toPrecision(9)).toString();
const out = [
  `# Stanford bunny from the npm package 'bunny' (public domain), ${bunny.positions.length} vertices, ${bunny.cells.length} triangles`,
  "# transformed: p -> 0.01 * (x, -z, y)",
];
for (const [x, y, z] of bunny.positions) {
  out.push(`v ${fmt(0.01 * x)} ${fmt(-0.01 * z)} ${fmt(0.01 * y)}`);
}
for (const c of bunny.cells) {
  out.push("f " + c.map((i) => i + 1).join(" "));
}
process.stdout.write(out.join("\n") + "\n");

// packRecord's maker (fast_js.go): (L bytes, F number slots, N numbers, S strings: pack.go's tables) => [buffer, packRecord]; -1: not taken.
(L,F,N,S)=>{const b=new ArrayBuffer(L),f=new Float64Array(b,0,F),u=new Uint8Array(b),d=new DataView(b),e=new TextEncoder(),K=N.length,
P=(o)=>{const p=Object.getPrototypeOf(o);return p===Object.prototype||p===null};
return[u,(v)=>{try{if(typeof v!=="object"||v===null||!P(v))return -1;let o=8*F;
const n=(i,x)=>{if(x==null)f[i]=NaN;else if(typeof x==="number"&&Number.isFinite(x))f[i]=x;else throw 0},
s=(x,a)=>{if(x==null&&!a){d.setUint32(o,4294967295,true);o+=4;return}if(typeof x!=="string")throw 0;const r=e.encodeInto(x,u.subarray(o+4));if(r.read!==x.length)throw 0;d.setUint32(o,r.written,true);o+=4+r.written},
y=(x)=>x==null?NaN:x instanceof Uint8Array?x.length:(()=>{throw 0})(),
j=(x)=>{if(x==null)return;if(typeof x!=="object"||!P(x))throw 0;return x};
for(let i=0;i<K;i++)n(i,v[N[i]]);for(const k of S)s(v[k]);f[K]=y(v.payload);
const r=j(v.lastError);f[K+1]=r?1:NaN;n(K+2,r&&r.status);n(K+3,r&&r.at);s(r&&r.code);s(r&&r.message);
const q=j(v.response);f[K+4]=q?1:NaN;n(K+5,q&&q.status);const w=q&&q.replayed;f[K+6]=w==null?NaN:typeof w==="boolean"?+w:(()=>{throw 0})();f[K+7]=y(q&&q.body);
const a=v.dependencyIds;if(a==null)f[K+8]=NaN;else{if(!Array.isArray(a))throw 0;f[K+8]=a.length;for(let i=0;i<a.length;i++)s(a[i],1)}
return o}catch{return -1}}]}

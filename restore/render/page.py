"""The HTML export's page: one self-contained file (inline CSS and script, nothing fetched),
searchable in the page, light or dark as the reader's system is, printable (every
collapsed call opened for print), and optionally encrypted with a passphrase.

Encryption: AES-256-GCM (`cryptography`, a maintained library) under a key derived with
PBKDF2-HMAC-SHA256 (600,000 iterations, a random 16-byte salt): the two the browser's
WebCrypto (`SubtleCrypto.deriveKey` and `decrypt`) has in every browser, so the page opens
anywhere with no code but its own. The body is encrypted in pieces of about 1 MiB as it
is written (each with its own nonce, its index as associated data, so pieces cannot be
dropped or reordered unseen), so an export of any length is encrypted in bounded memory.
An encrypted page carries no title and no recorded text: only the pieces.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Callable, Iterator
from typing import IO

PIECE = 1024 * 1024
ITERATIONS = 600_000
"""OWASP's figure for PBKDF2-HMAC-SHA256 (2023)."""

CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--dim:#59636e;--line:#d1d9e0;
--box:#f6f8fa;--bad:#cf222e;--add:#1a7f37;--del:#cf222e;--mark:#fff8c5}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--dim:#9198a1;
--line:#3d444d;--box:#151b23;--bad:#ff7b72;--add:#3fb950;--del:#f85149;--mark:#5a4a00}}
body{background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,sans-serif;
max-width:60rem;margin:0 auto;padding:1rem 1.5rem}
header h1{font-size:1.4rem;margin:.2rem 0}.facts,.redacted,.note,.sep{color:var(--dim)}
.banner{border:1px solid var(--bad);border-radius:6px;padding:.5rem .8rem;margin:.8rem 0}
.role{font-size:.95rem;margin:1.2rem 0 .2rem;text-transform:capitalize}
.msg{white-space:pre-wrap;overflow-wrap:anywhere}
.sep{border-top:1px solid var(--line);margin:1rem 0 .4rem;padding-top:.3rem}
pre{background:var(--box);padding:.5rem;overflow:auto;white-space:pre-wrap;
overflow-wrap:anywhere;font-size:.85rem}
details{margin:.2rem 0}summary{cursor:pointer;font-family:ui-monospace,monospace;font-size:.85rem}
.op,.edit,.note{font-family:ui-monospace,monospace;font-size:.85rem}
.failed summary,.op.failed,.bad{color:var(--bad)}.bad{font-weight:bold}
.add{color:var(--add)}.del{color:var(--del)}.hunk{color:var(--dim)}
.sub{border-left:3px solid var(--line);padding-left:.8rem;margin:.5rem 0}
.todos ul{margin:.2rem 0;list-style:none;padding-left:1rem}.done{color:var(--dim)}
#find{position:sticky;top:0;background:var(--bg);padding:.4rem 0;
border-bottom:1px solid var(--line)}
#find input{width:60%;font:inherit;padding:.2rem .4rem}.hidden{display:none}
mark{background:var(--mark);color:inherit}
footer{color:var(--dim);border-top:1px solid var(--line);margin-top:1.5rem;padding-top:.4rem}
#lock{margin:3rem auto;max-width:26rem}#lock input{font:inherit;width:100%;padding:.3rem}
@media print{#find,#lock{display:none}.sub{border:none}details>summary{list-style:none}}
"""

SCRIPT = """
(function(){
function start(){
  var input=document.querySelector('#find input'),count=document.querySelector('#find span');
  if(!input)return;
  // a long transcript is searched once typing pauses, not at every key
  var timer=null,pause=document.querySelectorAll('#doc .e').length>5000?250:0;
  input.addEventListener('input',function(){clearTimeout(timer);timer=setTimeout(find,pause);});
  function find(){
    var q=input.value.trim().toLowerCase(),n=0;
    document.querySelectorAll('#doc .e').forEach(function(e){
      var hit=!q||e.textContent.toLowerCase().indexOf(q)>=0;
      e.classList.toggle('hidden',!hit);
      if(hit&&q){n++;if(e.tagName==='DETAILS')e.open=true;}
    });
    document.querySelectorAll('#doc details.sub').forEach(function(d){
      d.classList.toggle('hidden',!!q&&!d.querySelector('.e:not(.hidden)'));
    });
    count.textContent=q?n+' found':'';
  }
}
window.addEventListener('beforeprint',function(){
  document.querySelectorAll('details').forEach(function(d){d.open=true;});});
window.sessiondStart=start;
if(!document.getElementById('lock'))start();
})();
"""

UNLOCK = """
(function(){
function bytes(b64){var s=atob(b64),a=new Uint8Array(s.length);
  for(var i=0;i<s.length;i++)a[i]=s.charCodeAt(i);return a;}
var form=document.getElementById('lock'),say=document.getElementById('why');
form.addEventListener('submit',async function(ev){
  ev.preventDefault();
  var meta=JSON.parse(document.getElementById('meta').textContent);
  var pass=new TextEncoder().encode(form.querySelector('input').value);
  try{
    var base=await crypto.subtle.importKey('raw',pass,'PBKDF2',false,['deriveKey']);
    var key=await crypto.subtle.deriveKey({name:'PBKDF2',hash:'SHA-256',
      salt:bytes(meta.salt),iterations:meta.iterations},base,{name:'AES-GCM',length:256},
      false,['decrypt']);
    var pieces=document.querySelectorAll('script.piece'),out=[];
    for(var i=0;i<pieces.length;i++){
      var data=bytes(pieces[i].textContent);
      var plain=await crypto.subtle.decrypt({name:'AES-GCM',iv:data.slice(0,12),
        additionalData:new TextEncoder().encode(String(i))},key,data.slice(12));
      out.push(new TextDecoder().decode(plain));
    }
    var page=document.createElement('div');page.id='page';page.innerHTML=out.join('');
    form.replaceWith(page);window.sessiondStart();
  }catch(e){say.textContent='That passphrase does not open this transcript.';}
});
})();
"""


def _head(title: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>\n"
    )


def _inner(
    heading: str,
    facts: list[str],
    banner: str | None,
    redacted: str,
    body: Iterator[str],
    footer: Callable[[], str],
) -> Iterator[str]:
    from restore.render.text import safe

    def h(text: str) -> str:
        return html.escape(safe(text))

    yield (
        f'<header><h1>{h(heading)}</h1><div class="facts">{h(" · ".join(facts))}</div>'
        f'<div class="redacted">{h(redacted)}</div>'
    )
    if banner:
        yield f'<div class="banner" role="alert">⚠ {h(banner)}</div>'
    yield (
        '</header><div id="find"><input type="search" placeholder="Find in this transcript" '
        'aria-label="Find in this transcript"> <span></span></div><main id="doc">\n'
    )
    yield from body
    yield f"</main><footer>{h(footer())}</footer>\n"


def write(
    out: IO[bytes],
    heading: str,
    facts: list[str],
    banner: str | None,
    redacted: str,
    body: Iterator[str],
    footer: Callable[[], str],
    passphrase: bytes | None,
) -> None:
    inner = _inner(heading, facts, banner, redacted, body, footer)
    if passphrase is None:
        out.write(_head(f"{heading} · sessiond").encode())
        for chunk in inner:
            out.write(chunk.encode())
        out.write(f"<script>{SCRIPT}</script></body></html>\n".encode())
        return
    _write_encrypted(out, inner, passphrase)


def derive_key(passphrase: bytes, salt: bytes, iterations: int = ITERATIONS) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=iterations)
    return kdf.derive(passphrase)


def _write_encrypted(out: IO[bytes], inner: Iterator[str], passphrase: bytes) -> None:
    import json

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    salt = os.urandom(16)
    aead = AESGCM(derive_key(passphrase, salt))
    meta = {
        "salt": base64.b64encode(salt).decode(),
        "iterations": ITERATIONS,
        "cipher": "AES-256-GCM",
        "kdf": "PBKDF2-HMAC-SHA256",
    }
    out.write(_head("Encrypted transcript · sessiond").encode())
    out.write(
        b'<form id="lock"><h1>Encrypted transcript</h1><p>This sessiond export is encrypted. '
        b'Enter its passphrase to read it.</p><input type="password" autocomplete="off" '
        b'aria-label="Passphrase" autofocus> <button type="submit">Open</button>'
        b'<p id="why" role="alert"></p></form>\n'
    )
    out.write(f'<script type="application/json" id="meta">{json.dumps(meta)}</script>\n'.encode())
    index = 0
    held: list[bytes] = []
    size = 0

    def seal() -> None:
        nonlocal index, size
        nonce = os.urandom(12)
        sealed = nonce + aead.encrypt(nonce, b"".join(held), str(index).encode())
        out.write(b'<script type="application/octet-stream" class="piece">')
        out.write(base64.b64encode(sealed))
        out.write(b"</script>\n")
        index, size = index + 1, 0
        held.clear()

    for chunk in inner:
        data = chunk.encode()
        held.append(data)
        size += len(data)
        if size >= PIECE:
            seal()
    if held or index == 0:
        seal()
    out.write(f"<script>{SCRIPT}</script><script>{UNLOCK}</script></body></html>\n".encode())


def decrypt(document: bytes, passphrase: bytes) -> str:
    """The page an encrypted export holds (what the browser's script does, for tests and
    for anyone without a browser)."""
    import json
    import re

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    found = re.search(rb'<script type="application/json" id="meta">(.*?)</script>', document)
    if found is None:
        raise ValueError("not an encrypted sessiond export")
    meta = json.loads(found.group(1))
    aead = AESGCM(derive_key(passphrase, base64.b64decode(meta["salt"]), meta["iterations"]))
    pieces = re.findall(
        rb'<script type="application/octet-stream" class="piece">(.*?)</script>', document
    )
    out = []
    for index, piece in enumerate(pieces):
        sealed = base64.b64decode(piece)
        out.append(aead.decrypt(sealed[:12], sealed[12:], str(index).encode()).decode())
    return "".join(out)

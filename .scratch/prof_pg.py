import asyncio, cProfile, pstats, uuid, time
from tether import Message, RunStarted, ToolCall, ToolStarted
from tether.stores.postgres import PostgresStore
DSN="postgresql://postgres@127.0.0.1:5432/test"
async def main():
    schema=f"prof_{uuid.uuid4().hex[:6]}"
    s=await PostgresStore.connect(DSN, schema=schema)
    await s.append("r",[RunStarted("r",(Message.user("go"),))],expected_seq=0)
    lease=await s.acquire("r","me",600)
    seq=1
    ev=ToolStarted(ToolCall("c1","look_up",'{"n": 1}'),1)
    for i in range(50):
        seq=await s.append("r",[ev],expected_seq=seq,lease=lease)
    pr=cProfile.Profile(); c0=time.process_time()
    pr.enable()
    for i in range(1000):
        seq=await s.append("r",[ev],expected_seq=seq,lease=lease)
    pr.disable()
    print("cpu us/append", (time.process_time()-c0)*1000)
    async with s._session("x") as conn: await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    await s.aclose()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
asyncio.run(main())

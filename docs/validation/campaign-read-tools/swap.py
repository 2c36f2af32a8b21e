import os, time
os.chdir("/tmp/cr/race")
while True:
    os.rename("node9-bbbb", ".d9"); os.rename(".l9", "node9-bbbb"); time.sleep(0.0005)
    os.rename("node9-bbbb", ".l9"); os.rename(".d9", "node9-bbbb"); time.sleep(0.002)
